"""The MinerU2.5 vision-language engine.

protocol   prompts, layout parsing, crops and post-processing (pure Python + PIL)
processor  the Qwen2-VL image processor and position ids (numpy + PIL)
generate   the decoding loop shared by every runtime (numpy)
"""
