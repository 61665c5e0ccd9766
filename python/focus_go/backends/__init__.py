"""Connect the acting model: policy backends, formats, parsers and the records they pass.

A policy backend generates tokens; ``PolicyFormat`` binds its tokenizer and chat template
to an action parser. Backends resolve the format from the model name unless you supply one.
"""

from ..generation.format import ChatCodec, HFTokenizer, PolicyFormat
from ..generation.parsing import (
    ActionParser,
    HermesToolCallParser,
    NativeToolCallParser,
    QwenXMLToolCallParser,
    TextActionParser,
    TokenChunkParser,
)
from ..generation.policy import Completion, Policy
from ..generation.servers import SGLangPolicy, VLLMPolicy
from ..generation.types import (
    GenerateResult,
    NativeToolCall,
    PreparedPrompt,
    SamplingParams,
    TokenChunk,
    TokenId,
    ToolCall,
    ToolTurn,
)

__all__ = [
    "ActionParser",
    "ChatCodec",
    "Completion",
    "GenerateResult",
    "HFTokenizer",
    "HermesToolCallParser",
    "NativeToolCall",
    "NativeToolCallParser",
    "Policy",
    "PolicyFormat",
    "PreparedPrompt",
    "QwenXMLToolCallParser",
    "SGLangPolicy",
    "SamplingParams",
    "TextActionParser",
    "TokenChunk",
    "TokenChunkParser",
    "TokenId",
    "ToolCall",
    "ToolTurn",
    "VLLMPolicy",
]
