"""Connect the acting model: policy backends, formats, parsers and the records they pass.

A policy backend generates tokens; ``PolicyFormat`` binds its tokenizer and chat template
to an action parser. Backends resolve the format from the model name unless you supply one.
"""

from ..generation.format import ChatCodec, HFTokenizer, PolicyFormat, PreparedPrompt
from ..generation.parsing import (
    ActionParser,
    DeepSeekV3ToolCallParser,
    HarmonyToolCallParser,
    HermesToolCallParser,
    Llama3JSONToolCallParser,
    PythonicToolCallParser,
    NativeToolCallParser,
    QwenXMLToolCallParser,
    TextActionParser,
    TokenChunkParser,
)
from ..generation.openai import OpenAIChatPolicy, OpenAIResponsesPolicy
from ..generation.policy import Completion, Policy
from ..generation.replay import ReplayPolicy
from ..generation.servers import SGLangPolicy, VLLMPolicy
from ..generation.slime import SlimePolicy
from ..generation.tinker import TinkerPolicy
from ..generation.types import SamplingParams
from ..types import (
    GenerateResult,
    NativeToolCall,
    TokenChunk,
    TokenId,
    ToolCall,
    ToolTurn,
)

__all__ = [
    "ActionParser",
    "ChatCodec",
    "Completion",
    "DeepSeekV3ToolCallParser",
    "GenerateResult",
    "HFTokenizer",
    "HarmonyToolCallParser",
    "HermesToolCallParser",
    "Llama3JSONToolCallParser",
    "NativeToolCall",
    "NativeToolCallParser",
    "OpenAIChatPolicy",
    "OpenAIResponsesPolicy",
    "Policy",
    "PolicyFormat",
    "PreparedPrompt",
    "PythonicToolCallParser",
    "QwenXMLToolCallParser",
    "ReplayPolicy",
    "SGLangPolicy",
    "SamplingParams",
    "SlimePolicy",
    "TextActionParser",
    "TinkerPolicy",
    "TokenChunk",
    "TokenChunkParser",
    "TokenId",
    "ToolCall",
    "ToolTurn",
    "VLLMPolicy",
]
