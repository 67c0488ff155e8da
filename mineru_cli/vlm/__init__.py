"""The MinerU2.5 vision-language engine.

protocol       prompts, profiles, layout parsing, crops and post-processing (pure Python + PIL)
processor      the Qwen2-VL image processor and position ids (numpy + PIL)
generate       the decoding loop shared by every runtime (numpy)
model_dir      where the model folder is (--model, $MINERU_MODEL_PATH, ./models, HF cache)
tokenizer      chat ids and decoding through `tokenizers`; VlmInput, the runtime-neutral request
export_format  the ONNX export folder: file names, manifest, format version, verification
int8_target    which CPU family an export's INT8 weights are for, and what saturates here
runtime_onnx   the ONNX Runtime runtime over an export folder (numpy, no torch)
runtime_torch  the PyTorch reference runtime (imports torch; load it lazily)

Nothing here imports the cache, the pipeline or the runner.
"""
