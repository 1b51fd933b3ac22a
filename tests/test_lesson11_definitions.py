"""What lesson 11 teaches (the EAGLE head's draft step and loss, a Llama layer), defined in its
cells, agrees with the package (no engine)."""

import pytest
import torch

from speclab import train
from tests.notebook_defs import lesson_definitions

# a small Llama shape: grouped-query attention (4 query heads, 2 key/value heads) like SmolLM2's
CFG = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 64}
VOCAB = 100


@pytest.fixture(scope="module")
def lesson11():
    return lesson_definitions("11")


def random_eagle_head(seed: int = 0) -> train.EagleHead:
    torch.manual_seed(seed)
    embed = torch.randn(VOCAB, CFG["hidden_size"])
    head = train.EagleHead(CFG, embed, torch.randperm(VOCAB)[:60], ttt_steps=3)
    with torch.no_grad():  # away from the pass-through start, so that every parameter matters
        for p in head.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return head


def random_batch(seed: int = 1) -> dict:
    gen = torch.Generator().manual_seed(seed)
    B, L = 2, 12
    return {"ids": torch.randint(0, VOCAB, (B, L), generator=gen), "lengths": torch.tensor([12, 9]),
            "prompt_lens": torch.tensor([4, 3]), "greedy": torch.randint(0, VOCAB, (B, L), generator=gen),
            "final": torch.randn(B, L, CFG["hidden_size"], generator=gen)}


def test_lesson_11_defines_the_eagle_step_and_loss_the_package_trains(lesson11):
    head, batch = random_eagle_head(), random_batch()
    T = batch["ids"].shape[1] - 2
    tokens, hidden, place = batch["ids"][:, 1:1 + T], batch["final"][:, :T], torch.arange(T)
    out, _, k, v = head.step(tokens, hidden, place, [], [])
    out_l, k_l, v_l = lesson11["eagle_step"](head, tokens, hidden, place, [], [])
    for a, b in ((out, out_l), (k, k_l), (v, v_l)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # a later step: attention over step 0's keys plus its own
    out2, _, _, _ = head.step(tokens[:, :T - 1], out[:, :T - 1], place[:T - 1] + 1,
                              [k[..., :T - 1, :]], [v[..., :T - 1, :]])
    out2_l, _, _ = lesson11["eagle_step"](head, tokens[:, :T - 1], out[:, :T - 1], place[:T - 1] + 1,
                                          [k[..., :T - 1, :]], [v[..., :T - 1, :]])
    torch.testing.assert_close(out2, out2_l, rtol=1e-5, atol=1e-5)

    loss, accs = head.loss(batch)
    loss_l, accs_l = lesson11["eagle_loss"](head, batch, steps=head.ttt_steps)
    torch.testing.assert_close(loss, loss_l, rtol=1e-5, atol=1e-5)
    assert accs == accs_l and len(accs) == 3
    # the gradients agree too: training with the lesson's loss would train the same head
    grads = torch.autograd.grad(loss, list(head.parameters()))
    grads_l = torch.autograd.grad(lesson11["eagle_loss"](head, batch)[0], list(head.parameters()))
    for a, b in zip(grads, grads_l):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_the_package_llama_layer_is_transformers_llama_decoder_layer():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    torch.manual_seed(0)
    ours = train.LlamaLayer(CFG, input_norm=True)
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # norms away from 1, weights away from their start
    config = LlamaConfig(**CFG, vocab_size=VOCAB, attention_bias=False, mlp_bias=False, hidden_act="silu")
    config._attn_implementation = "eager"
    theirs = LlamaDecoderLayer(config, layer_idx=0).eval()
    missing, unexpected = theirs.load_state_dict(ours.state_dict(), strict=True)  # the same names: vLLM's
    assert not missing and not unexpected

    B, T = 2, 10
    x, positions = torch.randn(B, T, CFG["hidden_size"]), torch.arange(T)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions[None].expand(B, T))
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None].expand(B, 1, T, T)
    with torch.no_grad():
        expected = theirs(x, attention_mask=causal, position_ids=positions[None].expand(B, T),
                          position_embeddings=(cos, sin))
        expected = expected[0] if isinstance(expected, tuple) else expected
        got = ours(x, positions)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
