"""Tool calling for ChatML tokenizers whose chat template has none (e.g. SmolLM2-Instruct,
the project's shipped tokenizer), so TRL's multi-turn training (``tools=`` or
``environment_factory=``) accepts them.

TRL's ``GRPOTrainer`` needs three things from the tokenizer for multi-turn episodes: a chat
template that renders assistant ``tool_calls`` and ``tool`` messages, one that is
prefix-preserving (earlier turns render the same whatever follows), and a response parser
(``response_template``) that finds the tool calls in a generated turn. A plain ChatML
template (``<|im_start|>role\\ncontent<|im_end|>``) has none of them.

``enable_tool_calling(tokenizer)`` installs ``chatml_tool_template(default_system)``: the
same ChatML rendering for conversations without tools (the original template's default
system message, if it had one, is kept), plus tool calls written as
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` in the assistant turn and
tool results as a user turn of ``<tool_response>`` blocks (the layout Qwen2.5 and Hermes
models use), and sets ``CHATML_TOOL_RESPONSE`` as the tokenizer's ``response_template``.
The assistant text before a tool call stays in ``content`` (``<think>`` included), which is
what SHARPO's segmenter and most reward functions read.
"""
from __future__ import annotations

import json
import re
from typing import Optional

_MARK = "\u2063SHARPO\u2063"
_CHATML_USER = re.compile(r"^(?:<\|im_start\|>system\n(?P<system>.*?)<\|im_end\|>\n)?"
                          r"<\|im_start\|>user\n" + re.escape(_MARK) + r"<\|im_end\|>\n<\|im_start\|>assistant\n$",
                          re.DOTALL)

_TOOLS_PREAMBLE = ("# Tools\n\nYou can call the functions described (as JSON schemas) inside <tools></tools>. "
                   "To call one, write a JSON object with its name and arguments inside <tool_call></tool_call> "
                   "tags:\n<tool_call>\n{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}\n"
                   "</tool_call>\n\n<tools>")

# transformers >= 5.13 response parser (``tokenizer.response_template``) for the turns the
# template above renders: tool calls (JSON, repeated) and the text around them.
CHATML_TOOL_RESPONSE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {
            "close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)",
            "content": "text",
        },
    },
}


def chatml_tool_template(default_system: Optional[str] = None) -> str:
    """ChatML chat template with tool calling. ``default_system``: the system message used when
    the conversation has none (None: no system turn then, unless tools are given)."""
    default = "" if default_system is None else default_system
    has_default = default_system is not None
    return (
        "{%- set ns = namespace(system=" + json.dumps(default) + ", has_system=" + str(has_default).lower() + ") %}"
        "{%- if messages and messages[0]['role'] == 'system' %}"
        "{%- set ns.system = messages[0]['content'] %}{%- set ns.has_system = true %}"
        "{%- set messages = messages[1:] %}"
        "{%- endif %}"
        "{%- if tools %}"
        "{{- '<|im_start|>system\\n' }}"
        "{%- if ns.system %}{{- ns.system + '\\n\\n' }}{%- endif %}"
        "{{- " + json.dumps(_TOOLS_PREAMBLE) + " }}"
        "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
        "{{- '\\n</tools><|im_end|>\\n' }}"
        "{%- elif ns.has_system %}"
        "{{- '<|im_start|>system\\n' + ns.system + '<|im_end|>\\n' }}"
        "{%- endif %}"
        "{%- for message in messages %}"
        "{%- if message['role'] == 'assistant' and message.tool_calls %}"
        "{{- '<|im_start|>assistant\\n' }}"
        "{%- if message['content'] %}{{- message['content'] + '\\n' }}{%- endif %}"
        "{%- for call in message['tool_calls'] %}"
        "{%- if call.function is defined %}{%- set call = call.function %}{%- endif %}"
        "{%- set args = call.arguments if call.arguments is string else (call.arguments | tojson) %}"
        "{%- if not loop.first %}{{- '\\n' }}{%- endif %}"
        "{{- '<tool_call>\\n{\"name\": \"' + call.name + '\", \"arguments\": ' + args + '}\\n</tool_call>' }}"
        "{%- endfor %}"
        "{{- '<|im_end|>\\n' }}"
        "{%- elif message['role'] == 'tool' %}"
        "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
        "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
        "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
        "{%- else %}"
        "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
        "{%- endif %}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )


def chatml_default_system(tokenizer) -> tuple[bool, Optional[str]]:
    """(is the tokenizer's chat template ChatML?, its default system message or None)."""
    if getattr(tokenizer, "chat_template", None) is None:
        return False, None
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": _MARK}], tokenize=False,
                                             add_generation_prompt=True)
    except Exception:                      # a template that rejects this conversation
        return False, None
    m = _CHATML_USER.match(text) if isinstance(text, str) else None
    return (m is not None), (m.group("system") if m else None)


def enable_tool_calling(tokenizer):
    """Give a ChatML tokenizer without tool support ``chatml_tool_template`` and
    ``CHATML_TOOL_RESPONSE`` (in place; returns the tokenizer). A tokenizer whose template
    already renders tool calls is returned unchanged. ValueError for a template that is not
    ChatML (set a tool-calling template yourself, as TRL's docs describe)."""
    from trl.chat_template_utils import supports_tool_calling

    if supports_tool_calling(tokenizer):
        return tokenizer
    chatml, system = chatml_default_system(tokenizer)
    if not chatml:
        raise ValueError("processing_class: its chat template does not support tool calling and is not ChatML "
                         "(<|im_start|>role ... <|im_end|>), so sharpo cannot add tool calling to it; set "
                         "tokenizer.chat_template to a tool-calling template of the model family")
    tokenizer.chat_template = chatml_tool_template(system)
    tokenizer.response_template = CHATML_TOOL_RESPONSE
    return tokenizer
