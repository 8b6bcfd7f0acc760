"""A tiny causal LM and a locally trained tokenizer, so every training path runs on CPU offline.

Tests and smoke runs must never download a model. This module builds a Qwen2-architecture model of
~100k parameters from a config and trains a byte-level BPE tokenizer on a small built-in text (SQL,
YAML and English words of the dbt world) with the `tokenizers` library, then wraps it as a
transformers ``PreTrainedTokenizerFast`` carrying the Qwen2.5 chat template that trl ships (read from
the installed trl at build time, so trl recognises it: tool-call parsing for GRPO and the training
template with generation markers for assistant-only loss). Both are saved to one folder that
``AutoModelForCausalLM.from_pretrained`` / ``AutoTokenizer.from_pretrained`` load.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: Tokens the chat template emits around tool calls; added as special tokens so they stay whole.
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")

_CORPUS = (
    """
select id, customer_id, status, amount from {{ ref('stg_orders') }} where status = 'completed'
with orders as ( select * from {{ ref('stg_orders') }} ), payments as ( select * from {{ ref('stg_payments') }} )
select order_id, sum(amount) as total_amount, count(*) as n from payments group by order_id order by 1
left join customers on orders.customer_id = customers.customer_id and orders.is_active is not false
case when status in ('paid', 'shipped') then 1 else 0 end as is_paid, coalesce(discount, 0) as discount
models: - name: orders description: one row per order columns: - name: order_id tests: [unique, not_null]
version: 2 sources: - name: raw tables: - name: customers - name: payments - name: events
You are a data engineer. Fix the dbt model so that the hidden check passes. The file is models/orders.sql.
<file path="models/orders.sql"> </file> --- a/models/orders.sql +++ b/models/orders.sql @@ -1,3 +1,3 @@
{"name": "read_file", "arguments": {"path": "models/orders.sql"}} {"name": "submit", "arguments": {}}
list_files read_file write_file run_sql build submit The build passed. 3 tests passed, 0 failed.
"""
    * 4
)


@dataclass(frozen=True)
class TinySpec:
    """The size of the tiny model; the defaults give about 100k parameters."""

    vocab_size: int = 512
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 8192
    seed: int = 0


def train_tokenizer(vocab_size: int = 512):  # -> transformers.PreTrainedTokenizerFast
    """Train a byte-level BPE tokenizer on the built-in corpus and wrap it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS + TOOL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL_TOKENS[1:] + TOOL_TOKENS),
    )
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.padding_side = "left"
    return tokenizer


def build_tiny(folder: Path, spec: TinySpec = TinySpec()) -> Path:
    """Build the tiny model + tokenizer and save both to ``folder``; return the folder."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tokenizer = train_tokenizer(spec.vocab_size)
    torch.manual_seed(spec.seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def count_parameters(folder: Path) -> int:
    """Number of parameters of the model saved in ``folder``."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder)
    return sum(p.numel() for p in model.parameters())
