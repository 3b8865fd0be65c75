"""Attention as PyTorch's functional API computes it: ``scaled_dot_product_attention``
(boolean or additive masks, ``is_causal``, ``scale``, ``enable_gqa``, dropout; a query row
that may attend to nothing gives zeros, as PyTorch's safe softmax) and
``multi_head_attention_forward`` (packed or separate input projections, ``bias_k`` /
``bias_v``, ``add_zero_attn``, key padding and attention masks, averaged or per-head
weights), with PyTorch's checks and error texts.  Built from tensor ops (matmul, softmax,
where), so the gradients are theirs.

>>> import symgrad as torch
>>> q = k = v = torch.ones(1, 2, 4)
>>> torch.nn.functional.scaled_dot_product_attention(q, k, v).shape
torch.Size([1, 2, 4])
"""
from __future__ import annotations

import math
import warnings

from ..functions.creation import ones, zeros
from ..functions.elementwise import where
from ..functions.linalg import bmm, matmul
from ..functions.shape import cat
from ..graph import dtypes
from .padding import pad

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


def _F():
    """``nn.functional`` (its linear, softmax and dropout)."""
    from . import functional      # late: a cycle (functional re-exports this module)
    return functional


def linear(x, w, b=None):
    return _F().linear(x, w, b)


def softmax(x, dim):
    return _F().softmax(x, dim)


def dropout(x, p, training=True):
    return _F().dropout(x, p, training)


def _type_name(dt) -> str:
    return {"float32": "float", "float64": "double", "float16": "c10::Half",
            "int64": "long int", "int32": "int", "bool": "bool"}.get(dt.name, dt.name)


def _sdpa_checks(query, key, value, attn_mask, is_causal, dropout_p) -> None:
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.dim()} key.dim: {key.dim()} and "
                           f"value.dim: {value.dim()} instead.")
    if not query.dtype == key.dtype == value.dtype:
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_type_name(query.dtype)} key.dtype: "
                           f"{_type_name(key.dtype)} and value.dtype: "
                           f"{_type_name(value.dtype)} instead.")
    if attn_mask is not None and attn_mask.dtype != dtypes.bool_ \
            and attn_mask.dtype != query.dtype and not attn_mask.dtype.is_floating_point:
        raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {_type_name(attn_mask.dtype)} "
                           f"and  query.dtype: {_type_name(query.dtype)} instead.")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if dropout_p < 0 or dropout_p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")


def _matmul_check(a, b) -> None:
    """PyTorch's ``bmm`` text for the batched products of attention."""
    if a.shape[-1] != b.shape[-2]:
        lead = list(a.shape[:-2]) or [1]
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{lead[-1] if len(lead) == 1 else math.prod(lead)}, "
                           f"{a.shape[-1]}] but got: [{math.prod(b.shape[:-2]) or 1}, "
                           f"{b.shape[-2]}].")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False):
    """``softmax(q kᵀ · scale + bias) v``; ``attn_mask`` is boolean (True: may attend)
    or added to the scores; ``is_causal`` masks the upper triangle; ``enable_gqa`` lets
    ``key`` / ``value`` have fewer heads (dimension -3) than ``query``."""
    _sdpa_checks(query, key, value, attn_mask, is_causal, dropout_p)
    L, S = int(query.shape[-2]), int(key.shape[-2])
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa and query.dim() >= 3 and key.dim() >= 3:
        hq, hk = int(query.shape[-3]), int(key.shape[-3])
        if hk == 0 or hq % hk or hq % int(value.shape[-3]):
            raise RuntimeError("Number of heads in key and value must divide the number of "
                               "heads in ")
        key = key.repeat_interleave(hq // hk, -3)
        value = value.repeat_interleave(hq // int(value.shape[-3]), -3)
    kt = key.transpose(-2, -1)
    _matmul_check(query, kt)
    scores = matmul(query, kt) * factor
    allowed = None
    if is_causal:
        allowed = ones((L, S), dtype=dtypes.bool_).tril(0)
    elif attn_mask is not None and attn_mask.dtype == dtypes.bool_:
        allowed = attn_mask
    elif attn_mask is not None:
        scores = scores + attn_mask
    if allowed is not None:
        scores = scores.masked_fill(allowed.logical_not(), _NEG_INF)
    weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    _matmul_check(weights, value)
    return matmul(weights, value)


def _safe_softmax(scores):
    """Softmax over the last dimension; a row of -inf only (nothing to attend to) gives
    zeros and no gradient (PyTorch's ``_safe_softmax``)."""
    dead = (scores == _NEG_INF).all(-1, keepdim=True)
    w = softmax(where(dead, zeros((), dtype=scores.dtype), scores), -1)
    return where(dead, zeros((), dtype=scores.dtype), w)


# ---- multi-head attention ------------------------------------------------------------------
def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads) -> bool:
    if query.dim() == 3:
        kind, want_kpm = "batched (3-D)", 2
    elif query.dim() == 2:
        kind, want_kpm = "unbatched (2-D)", 1
    else:
        raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.dim()}-D query tensor")
    d = query.dim()
    if key.dim() != d or value.dim() != d:
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {d}-D but "
                             f"found {key.dim()}-D and {value.dim()}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.dim() != want_kpm:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` or "
                             f"{want_kpm}-D but found {key_padding_mask.dim()}-D tensor "
                             "instead")
    if attn_mask is not None:
        if attn_mask.dim() not in (2, 3):
            raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D "
                                 f"or 3-D but found {attn_mask.dim()}-D tensor instead")
        if d == 2 and attn_mask.dim() == 3:
            want = (num_heads, query.shape[0], key.shape[0])
            if tuple(attn_mask.shape) != want:
                raise AssertionError(f"Expected `attn_mask` shape to be {want} but got "
                                     f"{attn_mask.shape}")
    return d == 3


def canonical_mask(mask, mask_name: str, other_type, other_name: str, target_type,
                   check_other: bool = True):
    """A boolean mask as an additive float one (True: -inf); float masks as given."""
    if mask is None:
        return None
    if mask.dtype != dtypes.bool_ and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      "Use same type for both instead.", stacklevel=3)
    if not mask.dtype.is_floating_point:
        mask = zeros(tuple(mask.shape), dtype=target_type).masked_fill(mask, _NEG_INF)
    return mask


def _in_projection_packed(q, k, v, w, b):
    E = q.shape[-1]
    if k is v and q is k:
        return linear(q, w, b).unflatten(-1, (3, E)).movedim(-2, 0).unbind(0)
    if k is v:
        w_q, w_kv = w.split([E, 2 * E])
        b_q, b_kv = (None, None) if b is None else b.split([E, 2 * E])
        kv = linear(k, w_kv, b_kv).unflatten(-1, (2, E)).movedim(-2, 0)
        return linear(q, w_q, b_q), kv[0], kv[1]
    ws = w.chunk(3)
    bs = (None,) * 3 if b is None else b.chunk(3)
    return tuple(linear(x, wi, bi) for x, wi, bi in zip((q, k, v), ws, bs))


def _in_projection(q, k, v, w_q, w_k, w_v, b_q, b_k, b_v):
    Eq, Ek, Ev = q.shape[-1], k.shape[-1], v.shape[-1]
    for what, w, want in (("query", w_q, (Eq, Eq)), ("key", w_k, (Eq, Ek)),
                          ("value", w_v, (Eq, Ev))):
        if tuple(w.shape) != want:
            raise AssertionError(f"expecting {what} weights shape of {want}, but got {w.shape}")
    for what, b in (("query", b_q), ("key", b_k), ("value", b_v)):
        if b is not None and tuple(b.shape) != (Eq,):
            raise AssertionError(f"expecting {what} bias shape of {(Eq,)}, but got {b.shape}")
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def _fit_attn_mask(attn_mask, tgt_len, src_len, bsz, num_heads):
    if attn_mask is None:
        return None
    if attn_mask.dim() == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should "
                               f"be {(tgt_len, src_len)}.")
        return attn_mask.unsqueeze(0)
    if attn_mask.dim() == 3:
        want = (bsz * num_heads, tgt_len, src_len)
        if tuple(attn_mask.shape) != want:
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should "
                               f"be {want}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")


def _pad_last(mask):
    return None if mask is None else pad(mask, (0, 1))


def _static(t, name, bsz, num_heads, head_dim):
    if t.shape[0] != bsz * num_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz * num_heads}, but got "
                             f"{t.shape[0]}")
    if t.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {t.shape[2]}")
    return t


def multi_head_attention_forward(query, key, value, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v,
                                 add_zero_attn: bool, dropout_p: float, out_proj_weight,
                                 out_proj_bias, training: bool = True, key_padding_mask=None,
                                 need_weights: bool = True, attn_mask=None,
                                 use_separate_proj_weight: bool = False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights: bool = True,
                                 is_causal: bool = False):
    """PyTorch's ``F.multi_head_attention_forward`` (sequence-first inputs (L, N, E) or
    unbatched (L, E)): returns the attention output and, with ``need_weights``, the
    attention weights (averaged over heads with ``average_attn_weights``)."""
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = (int(s) for s in query.shape)
    src_len = int(key.shape[0])
    key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask",
                                      None if attn_mask is None else attn_mask.dtype,
                                      "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight "
                                     "is None")
        b = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight,
                                 v_proj_weight, *b)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape "
                                 f"{value.shape}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    attn_mask = _fit_attn_mask(attn_mask, tgt_len, src_len, bsz, num_heads)
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")
    heads = bsz * num_heads
    q = q.reshape(tgt_len, heads, head_dim).transpose(0, 1)
    k = (k.reshape(k.shape[0], heads, head_dim).transpose(0, 1) if static_k is None
         else _static(static_k, "static_k", bsz, num_heads, head_dim))
    v = (v.reshape(v.shape[0], heads, head_dim).transpose(0, 1) if static_v is None
         else _static(static_v, "static_v", bsz, num_heads, head_dim))
    if add_zero_attn:
        k = cat([k, zeros((heads, 1, head_dim), dtype=k.dtype)], 1)
        v = cat([v, zeros((heads, 1, head_dim), dtype=v.dtype)], 1)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    src_len = int(k.shape[1])
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got "
                                 f"{key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                                 f"{key_padding_mask.shape[1]}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1) \
            .reshape(heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        scores = bmm(q * math.sqrt(1.0 / float(head_dim)), k.transpose(-2, -1))
        if attn_mask is not None:
            scores = attn_mask + scores
        weights = softmax(scores, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = bmm(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        attn_mask = (attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 and attn_mask.dim() == 3
                     else attn_mask.reshape(bsz, num_heads, -1, src_len))
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not batched:
        out = out.squeeze(1)
    return out, None
