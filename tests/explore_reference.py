"""What the explorer's tests (tests/explore/) share: the texts they read (a line of Romeo's, the characters of its
tokenizer, a translation model's pairs), sampling's probabilities written out in plain Python, and activation
patching written out with two hooks."""

import math

import torch

TEXT = "ROMEO:\nBut, soft! what light through yonder window breaks?"
CHARS = TEXT + " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:!?'-\n"
PAIRS = [("15 juillet 2031", "2031-07-15"), ("5 mars 2021", "2021-03-05"), ("1 mai 2000", "2000-05-01")]


def reference_probs(logits: list[float], temperature: float, top_k: int | None, top_p: float | None) -> list[float]:
    """What the texts say sampling does, in float64: T = 0 all on the argmax; else logits / T, the top-k kept (ties
    with the k-th too), then the fewest most likely tokens whose mass reaches p, then softmax."""
    n = len(logits)
    if temperature == 0:
        best = max(range(n), key=lambda i: (logits[i], -i))
        return [1.0 if i == best else 0.0 for i in range(n)]
    z = [x / temperature for x in logits]
    if top_k is not None and top_k < n:
        kth = sorted(z, reverse=True)[top_k - 1]
        z = [x if x >= kth else -math.inf for x in z]

    def softmax(v):
        top = max(v)
        e = [math.exp(x - top) if x != -math.inf else 0.0 for x in v]
        return [x / sum(e) for x in e]

    if top_p is not None and top_p < 1:
        probs = softmax(z)
        mass, keep = 0.0, set()
        for i in sorted(range(n), key=lambda i: -probs[i]):
            if mass >= top_p:
                break
            keep.add(i)
            mass += probs[i]
        z = [x if i in keep else -math.inf for i, x in enumerate(z)]
    return softmax(z)


def logits_of(model, inputs):
    """A decoder's logits of ``(B, T)`` ids, or a translation model's of a ``(source, target)`` pair."""
    with torch.no_grad():
        return (model(*inputs) if isinstance(inputs, tuple) else model(inputs)).logits


def patched_by_hand(model, modules, clean, corrupt, layer, head):
    """The corrupted run's logits with head ``head``'s slice of layer ``layer``'s ``out_proj`` input taken from the
    clean run (``modules``: the attention modules patched, one per layer): one hook keeps it, another puts it in."""
    out_proj, d = modules[layer].out_proj, modules[layer].head_dim
    kept = {}
    handle = out_proj.register_forward_pre_hook(lambda m, args: kept.setdefault("x", args[0].detach().clone()))
    try:
        logits_of(model, clean)
    finally:
        handle.remove()

    def put(m, args):
        x = args[0].clone()
        x[..., head * d:(head + 1) * d] = kept["x"][..., head * d:(head + 1) * d]
        return (x,)

    handle = out_proj.register_forward_pre_hook(put)
    try:
        return logits_of(model, corrupt)
    finally:
        handle.remove()


def assert_refused(api, endpoint, body, status, words):
    """``api.call(endpoint, body)`` is refused with ``status`` and one line holding every one of ``words``."""
    from attnlab.explore.checks import ApiError

    try:
        api.call(endpoint, body)
    except ApiError as err:
        assert err.status == status, (err.status, err.message)
        for word in words:
            assert word in err.message, (word, err.message)
        assert "\n" not in err.message and "Traceback" not in err.message
    else:
        raise AssertionError(f"{endpoint} answered {body!r}")
