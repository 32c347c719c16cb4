"""The explorer's API, one function per endpoint, the same for the server, the notebook widget and the snapshot.

``Api(entries).call(endpoint, body, lang)`` answers one request: ``models``, ``forward``, ``head``, ``generate``,
``patch``, ``translate`` or ``font`` (docs/explore.md lists every field). A request that cannot be answered raises
:class:`~attnlab.explore.checks.ApiError`. Calls run one at a time (a lock): the models are shared, and two
forward passes at once on two cores only slow each other down. The last readings are kept, so a slider moved
over one text reads the model once.

Each call runs torch on ``threads`` threads (one by default): a request is a small forward pass, and on a 2-core
machine with anything else running, two threads wait for each other at every operation. Measured under a load
average of 9.9: the baby GPT's page request at 64 tokens took 112-859 ms (median of 8) on two threads, 14-17 ms
on one; MiniLM's at 64 tokens 459-1274 ms against 47-60 ms.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import torch

import attnlab.explore.checks as c
from attnlab.demo.context import one_thread
from attnlab.explore.arrays import ENCODINGS, encoded, overview
from attnlab.explore.cache_view import CACHES, CacheChoice, generate_view
from attnlab.explore.entry import Entry
from attnlab.explore.glyphs import FontCuts
from attnlab.explore.next_token import MAX_NEW_TOKENS, MAX_TOP, Sampling, probabilities, top_tokens
from attnlab.explore.patch_view import answer_tokens, check_lengths, patch_view, redrawn
from attnlab.explore.reading import SEQ2SEQ_MODES, Reading, read, read_tokens, target_tokens, token_text
from attnlab.explore.steps import Study, cross_steps, head_steps, study
from attnlab.i18n import LANGUAGES, language, set_language, tr
from attnlab.models import Transformer

FORWARD = ("model", "text", "target", "temperature", "top_k", "top_p", "top", "head_mask", "encoding", "mode",
           "detail", "overview", "lang")
HEAD = ("model", "text", "target", "mode", "layer", "head", "query", "lang")
GENERATE = ("model", "text", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "cache", "lang")
PATCH = ("model", "text", "corrupt", "target", "right", "wrong", "head", "all", "temperature", "top_k", "top_p", "top",
         "lang")
#: the most readings (and captures) kept: MiniLM's at 512 tokens hold 75 MB of weights each
KEPT = 4
#: the largest overview thumbnail, in cells a side
MAX_OVERVIEW = 128


class _Kept(OrderedDict):
    """The last :data:`KEPT` values computed, by key."""

    def get_or_make(self, key: Any, make: Callable[[], Any]) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = self[key] = make()
        while len(self) > KEPT:
            self.popitem(last=False)
        return value


@contextlib.contextmanager
def speaking(lang: str | None) -> Iterator[None]:
    """Messages in ``lang`` (the request's) while a call runs; the language before it afterwards."""
    before = language()
    set_language(lang if lang in LANGUAGES else before)
    try:
        yield
    finally:
        set_language(before)


class Api:
    """The endpoints over the models given at launch (see the module)."""

    def __init__(self, entries: list[Entry], fonts: FontCuts | None = None, threads: int = 1) -> None:
        self.entries = {e.name: e for e in entries}
        self.threads = threads
        self.fonts = fonts or FontCuts()
        self._lock = threading.Lock()
        self._readings, self._studies = _Kept(), _Kept()
        self.endpoints: dict[str, Callable[[dict[str, Any]], Any]] = {
            "models": lambda _body: self.models(), "forward": self.forward, "head": self.head,
            "generate": self.generate, "translate": self.translate, "patch": self.patch, "font": self.font}

    def call(self, endpoint: str, body: bytes | str | dict, lang: str | None = None) -> Any:
        """The answer of ``endpoint`` to ``body`` (JSON text or a dict), its messages in ``lang``."""
        if endpoint not in self.endpoints:
            raise c.ApiError(404, tr("no endpoint {endpoint!r}; the endpoints: {names}", endpoint=endpoint,
                                     names=", ".join(self.endpoints)))
        lock = self.fonts.lock if endpoint == "font" else self._lock  # a font cut never waits for a model
        with lock, speaking(lang), torch.no_grad(), one_thread(self.threads):
            data = {} if endpoint == "models" else c.parse_body(body)
            with speaking(data.get("lang") if isinstance(data.get("lang"), str) else lang):
                try:
                    return self.endpoints[endpoint](data)
                except (ValueError, TypeError) as err:  # bad input found further in: the model's own checks
                    raise c.ApiError(400, str(err)) from None

    def models(self) -> list[dict[str, Any]]:
        return [e.describe() for e in self.entries.values()]

    def entry(self, data: dict[str, Any]) -> Entry:
        name = data.get("model", next(iter(self.entries)) if len(self.entries) == 1 else None)
        if name not in self.entries:
            raise c.ApiError(404, tr("model: unknown model {name!r}; the models: {names}",
                                     name=c.shortened(name), names=", ".join(self.entries)))
        return self.entries[name]

    def reading(self, entry: Entry, text: str, target: str | None, off: frozenset) -> Reading:
        return self._readings.get_or_make((entry.name, text, target, off), lambda: read(entry, text, target, off))

    def forward(self, data: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/forward``: tokens, attention, the next token's probabilities, the loss (docs/explore.md)."""
        c.known_fields(data, FORWARD)
        entry = self.entry(data)
        text, target = c.text_field(data, "text"), self._target(entry, data)
        off = self._off(entry, data)
        sampling, top = self._sampling(data), c.int_field(data, "top", 1, MAX_TOP, 10)
        encoding = c.choice_field(data, "encoding", ENCODINGS, "json")
        run = self.reading(entry, text, target, off)
        answer: dict[str, Any] = {"model": entry.name, "kind": entry.kind, "tokens": list(run.tokens.tokens),
                                  "ids": list(run.tokens.ids), "cropped": run.tokens.crop_note(),
                                  "settings": sampling.as_dict(), "head_mask": self._shown_off(entry, off)}
        answer.update(self._attentions(entry, run, data, encoding))
        answer.update(self._predictions(entry, run, sampling, top))
        if off:
            whole = self.reading(entry, text, target, frozenset())
            answer["baseline"] = self._predictions(entry, whole, sampling, top)
            if run.embedding is not None and whole.embedding is not None:
                answer["baseline"]["embedding_similarity"] = float(run.embedding @ whole.embedding)
        return answer

    @staticmethod
    def _sampling(data: dict[str, Any]) -> Sampling:
        return Sampling(c.number_field(data, "temperature", 1.0), c.int_field(data, "top_k", 1, 2**31, None),
                        c.number_field(data, "top_p", None))

    @staticmethod
    def _off(entry: Entry, data: dict[str, Any]) -> frozenset[tuple[str, int, int]]:
        """The heads switched off, ``(attention, layer, head)``: a list of pairs (the one attention ``self``), or a
        translation model's object of them by attention."""
        if entry.kind == "seq2seq":
            layers = {mode: entry.layers_in(mode) for mode in SEQ2SEQ_MODES}
            return c.heads_by_attention(data, "head_mask", layers, entry.num_heads)
        pairs = c.heads_field(data, "head_mask", entry.num_layers, entry.num_heads)
        return frozenset(("self", layer, head) for layer, head in pairs)

    @staticmethod
    def _shown_off(entry: Entry, off: frozenset[tuple[str, int, int]]) -> Any:
        """``off`` as the request wrote it: ``[[layer, head], ...]``, or by attention for a translation model."""
        by_mode = {mode: sorted([layer, head] for m, layer, head in off if m == mode) for mode in SEQ2SEQ_MODES}
        return by_mode if entry.kind == "seq2seq" else sorted([layer, head] for _, layer, head in off)

    def _target(self, entry: Entry, data: dict[str, Any]) -> str | None:
        target = c.text_field(data, "target", required=False)
        if target is not None and entry.kind != "seq2seq":
            raise c.ApiError(400, tr("target: {name} is not a translation model; give the text alone",
                                     name=entry.name))
        return target

    def _attentions(self, entry: Entry, run: Reading, data: dict[str, Any], encoding: str) -> dict[str, Any]:
        """Every map in full (the default), or the page's share: one head's ``detail`` and the ``overview``."""
        mode = c.choice_field(data, "mode", run.modes(), run.modes()[0])
        names = {"self": "attentions", "encoder": "attentions", "decoder": "decoder_attentions",
                 "cross": "cross_attentions"}
        out: dict[str, Any] = {}
        if run.target is not None:
            out["target_tokens"] = list(run.target.tokens)
        if "detail" not in data and "overview" not in data:
            for name in run.modes():
                out[names[name]] = encoded(torch.stack(run.maps(name)), encoding)
            return out
        maps = run.maps(mode)
        detail = c.head_object(data, "detail", len(maps), entry.num_heads)
        if detail is not None:
            layer, head = detail
            out["detail"] = {"mode": mode, "layer": layer, "head": head, "weights": encoded(maps[layer][head],
                                                                                         encoding)}
        size = c.int_field(data, "overview", 0, MAX_OVERVIEW, None)
        if size:
            out["overview"] = {"mode": mode, "weights": encoded(overview(maps, size), encoding)}
        return out

    def _predictions(self, entry: Entry, run: Reading, sampling: Sampling, top: int) -> dict[str, Any]:
        if run.logits is None:
            return {"next_tokens": [], "kept": 0, "loss": run.loss}
        probs = probabilities(run.logits, sampling)
        return {"next_tokens": top_tokens(probs, lambda i: token_text(entry.tokenizer, i), top),
                "kept": int((probs > 0).sum()), "loss": run.loss}

    def head(self, data: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/head``: one head, step by step, for one query token."""
        c.known_fields(data, HEAD)
        entry = self.entry(data)
        text, target = c.text_field(data, "text"), self._target(entry, data)
        mode = c.choice_field(data, "mode", ["cross"] if entry.kind == "seq2seq" else ["self"],
                              "cross" if entry.kind == "seq2seq" else "self")
        layer = c.int_field(data, "layer", 0, entry.num_layers - 1, 0)
        head = c.int_field(data, "head", 0, entry.num_heads - 1, 0)
        source = read_tokens(entry, text, "source" if entry.kind == "seq2seq" else "text")
        rows = target_tokens(entry, target or "") if mode == "cross" else source
        query = c.int_field(data, "query", 0, len(rows.ids) - 1, len(rows.ids) - 1)
        if mode == "cross":
            return {"mode": mode, **cross_steps(entry, source, rows, layer, head, query)}
        found: Study = self._studies.get_or_make((entry.name, text), lambda: study(entry, source))
        return {"mode": mode, **head_steps(entry, found, layer, head, query)}

    def generate(self, data: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/generate``: tokens appended by ``generate``, and each one's attention over its cache."""
        c.known_fields(data, GENERATE)
        entry = self.entry(data)
        text = c.text_field(data, "text")
        n = c.int_field(data, "max_new_tokens", 1, MAX_NEW_TOKENS, 1)
        sampling = Sampling(c.number_field(data, "temperature", 1.0), c.int_field(data, "top_k", 1, 2**31, None),
                            c.number_field(data, "top_p", None), c.int_field(data, "seed", 0, 2**64 - 1, None))
        spec = data.get("cache", {"kind": "full"})
        if not isinstance(spec, dict):
            raise c.ApiError(400, tr("cache: expected an object {{\"kind\", ...}}, got {value!r}",
                                     value=c.shortened(spec)))
        c.known_fields(spec, ("kind", "sink_tokens", "sliding_window"))
        cache = CacheChoice(c.choice_field(spec, "kind", CACHES, "full"),
                            c.int_field(spec, "sink_tokens", 0, 4096, None),
                            c.int_field(spec, "sliding_window", 1, 4096, None))
        return {"model": entry.name, **generate_view(entry, read_tokens(entry, text), n, sampling, cache)}

    def patch(self, data: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/patch``: a head of the clean run (the text) put into the corrupted run, or every head; the
        logit difference at the last position and the patched run's next tokens (:mod:`attnlab.explore.patch_view`)."""
        c.known_fields(data, PATCH)
        entry = self.entry(data)
        if entry.patched is None:
            raise c.ApiError(400, tr("patch: {name} is an encoder: it predicts no next token, so there is no logit "
                                     "difference to patch; patching needs a decoder or a translation model",
                                     name=entry.name))
        text, target = c.text_field(data, "text"), self._target(entry, data)
        what = "source" if entry.kind == "seq2seq" else "text"
        given = c.text_field(data, "corrupt", required=False)
        proposed = given is None
        corrupt = redrawn(entry, read_tokens(entry, text, what)) if given is None else given
        read_tokens(entry, corrupt, "corrupt")  # its own name in the message, should the tokenizer not read it
        clean_run = self.reading(entry, text, target, frozenset())
        corrupt_run = self.reading(entry, corrupt, target, frozenset())
        check_lengths(clean_run, corrupt_run, what)
        vocab = entry.config.vocab_size - 1
        metric = answer_tokens(entry, clean_run, corrupt_run, c.int_field(data, "right", 0, vocab, None),
                               c.int_field(data, "wrong", 0, vocab, None))
        head = c.head_object(data, "head", entry.num_layers, entry.num_heads)
        every = data.get("all", False)
        if not isinstance(every, bool):
            raise c.ApiError(400, tr("all: expected true or false, got {value!r}", value=c.shortened(every)))
        sampling = self._sampling(data)
        numbers = patch_view(entry, clean_run, corrupt_run, metric, head, every, sampling,
                             c.int_field(data, "top", 1, MAX_TOP, 10))
        return {"model": entry.name, "attention": entry.patched, "corrupt": corrupt, "proposed": proposed,
                "tokens": list(clean_run.tokens.tokens), "corrupt_tokens": list(corrupt_run.tokens.tokens),
                "target_tokens": None if clean_run.target is None else list(clean_run.target.tokens),
                "settings": sampling.as_dict(), **numbers}

    def translate(self, data: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/translate``: a translation model's own greedy translation of ``text`` (what ``attnlab
        translate`` writes), the page's target."""
        from attnlab.generation.translation import translate

        c.known_fields(data, ("model", "text", "lang"))
        entry = self.entry(data)
        if entry.kind != "seq2seq":
            raise c.ApiError(400, tr("translate: {name} is not a translation model", name=entry.name))
        source = read_tokens(entry, c.text_field(data, "text"), "source")
        text = entry.tokenizer.decode(list(source.ids))
        assert isinstance(entry.model, Transformer)  # a seq2seq entry is a translation model
        return {"model": entry.name, "target": translate(entry.model, entry.tokenizer, [text])[0].target}

    def font(self, data: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/font``: an ``@font-face`` rule with the glyphs of ``chars`` (characters the page shows and its
        fonts lack)."""
        c.known_fields(data, ("chars", "lang"))
        chars = c.text_field(data, "chars")
        if len(chars) > self.fonts.MAX_CHARS:
            raise c.ApiError(413, tr("chars: {n:,} characters at once; at most {limit:,}", n=len(chars),
                                     limit=self.fonts.MAX_CHARS))
        return self.fonts.cut(chars)
