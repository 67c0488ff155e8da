"""The MinerU2.5 two-step protocol, without any model runtime (pure Python + PIL).

Step 1 (layout): the page, resized to the profile's layout size, is sent with the layout prompt;
the answer is parsed into blocks in reading order. Step 2 (content): every block that is not
skipped is cropped from the full-resolution page and read with its type's prompt. Then the
page's blocks are post-processed.

chat         the Qwen2 chat text, the system and task prompts
profiles     Profile (what differs between model generations), PROFILE_2509, PROFILE_PRO, and
             SamplingParams
layout       the layout answer's grammar -> LayoutBlock list (parse_layout)
crops        the step-1 page image and the step-2 crops (layout_image, prepare_crops)
otsl         OTSL tables -> HTML
latex        MinerU's LaTeX repairs for equations, display wrapping
postprocess  a page's blocks made final (post_process)

Where MinerU's behaviour is odd but observable in its output, it is reproduced on purpose and
said so; users compare our output with MinerU's.
"""
