"""The policy and its tokenizer: building (tiny, local, named GGUF models), LoRA adapters,
the fp32 master-weight optimizer, device and autocast.

May import: the root modules (errors, io) and assets/.
"""
