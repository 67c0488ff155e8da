"""The MinerU2.5 vision-language engine.

protocol   prompts, layout parsing, crops and post-processing (pure Python + PIL)
processor  the Qwen2-VL image processor and position ids (numpy + PIL)
generate   the decoding loop shared by every runtime (numpy)
model_dir  where the model folder is (--model, $MINERU_MODEL_PATH, ./models, HF cache)
tokenizer  chat ids and decoding through `tokenizers`; VlmInput, the runtime-neutral request
runtime_torch  the PyTorch reference runtime (imports torch; load it lazily)
"""
