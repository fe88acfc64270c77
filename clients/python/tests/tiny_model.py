"""A tiny Llama-style model and its tokenizer, built locally (no model hub): random weights saved
with save_pretrained, and a word-level tokenizer trained in-process on a generated corpus, saved as
a PreTrainedTokenizerFast. Used by the engine tests and the engine benchmark.

`build(path, **dims)` writes both into `path` and returns it. The weights come from a fixed seed,
so two builds with the same arguments are the same model. `prompt(n, seed)` returns a text of
exactly n tokens under that tokenizer (one word per token)."""
import os
import random
from typing import Optional

#: The words of the vocabulary: "w0".."w{n-1}"; one word is one token.
VOCAB_WORDS = 480
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]


def _words(n: int = VOCAB_WORDS):
    return [f"w{i}" for i in range(n)]


def build_tokenizer(path: str):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins the words with spaces
    rng = random.Random(7)
    words = _words()
    corpus = [" ".join(rng.choice(words) for _ in range(64)) for _ in range(200)] + [" ".join(words)]
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(vocab_size=len(words) + len(SPECIAL), special_tokens=SPECIAL))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(path)
    return fast


def build(path: str, *, hidden_size: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
          intermediate_size: int = 128, max_positions: int = 4096, dtype: str = "float32", seed: int = 1234,
          init_range: float = 0.2) -> str:
    """Writes the model and the tokenizer into `path`. `init_range` is large on purpose: random
    weights then give peaked logits, so greedy decoding has clear winners."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    os.makedirs(path, exist_ok=True)
    tok = build_tokenizer(path)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        initializer_range=init_range,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype=dtype,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(getattr(torch, dtype))
    model.save_pretrained(path)
    return path


def prompt(n: int, seed: int = 0, vocab: Optional[int] = None) -> str:
    """A text of exactly n tokens (one vocabulary word each)."""
    rng = random.Random(seed)
    words = _words(vocab or VOCAB_WORDS)
    return " ".join(rng.choice(words) for _ in range(n))
