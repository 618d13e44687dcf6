"""``triage-lightrag-server``: the stock ``lightrag-server`` (``lightrag.api``, 1.5.7) with its
``LightRAG`` instance instrumented (docs/lightrag.md, "The server").

Run it where you ran ``lightrag-server``, with the same arguments and ``.env``::

    triage-lightrag-server --port 9621 --working-dir ./rag_storage      # or python -m triage_lightrag.server
    triage-lightrag-server --gunicorn --workers 4                       # lightrag-gunicorn, instrumented

Every route, the web UI and the configuration are LightRAG's own; this module adds

- ``POST /triage/feedback`` ``{"query_id": ..., "score": 0..1, "source": "human"}`` (200 once durable;
  202 while the answer stream it rates is still open; an id another worker answered is accepted when
  the shared store holds its retrieval; 404 when neither this worker nor the store knows the id);
- ``GET /triage/summary``: recent query metrics (mean per metric, how many undefined), gate decisions,
  drops, failures;
- an ``X-Triage-Query-Id`` header on every ``/query*`` response (streaming included).

Options (a flag wins over its variable): ``--triage-store``/``TRIAGE_STORE_URL`` (a path or URL; default
``TRIAGE_STORE``, else ``triage.sqlite`` in LightRAG's ``--working-dir``), ``--triage-reweight``/
``TRIAGE_REWEIGHT=1``, ``--triage-unit``/``TRIAGE_UNIT`` (``triple``/``chunk``),
``--triage-gate``/``TRIAGE_GATE`` (``warn``, the default: record only; ``reroute``; ``off``), and
``--triage-funcs``/``TRIAGE_LIGHTRAG_FUNCS`` = ``module:callable``: called with LightRAG's parsed
arguments, it returns ``LightRAG(...)`` keyword overrides (``llm_model_func``, ``embedding_func``,
``tokenizer``, ...), for bringing your own functions, and for offline tests
(``triage_lightrag.testing:offline_server_functions``); with ``embedding_func`` given, the server's
provider embedding is never built, so no ``lightrag.llm.*`` provider module is imported.

How (LightRAG 1.5.7's ``create_app()`` builds ``rag = LightRAG(...)`` as a local its routers close
over): while :func:`create_app` runs LightRAG's own ``create_app``, the module's ``LightRAG`` name
(and, with an ``embedding_func`` override, ``create_embedding_function_from_args``) are swapped for
factories that capture the instance, then restored. The instance is instrumented in the app's
lifespan, after LightRAG initialized its storages, in the serving process: under
``lightrag-gunicorn`` (app preloaded in the master, then forked) each worker instruments its own
instance with its own manager and worker thread, sharing the store (query ids stay unique: a forked
worker draws its own id prefix). ``lightrag.api`` parses
``sys.argv`` on first use, so :func:`main` removes the ``--triage-*`` flags from it first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from triage_plugins.contract.errors import ConfigError, TriageError

__all__ = ["ServerOptions", "TriageServerState", "create_app", "get_application", "main", "split_argv"]

log = logging.getLogger("triage.lightrag.server")

UNITS = ("triple", "chunk")
GATES = ("warn", "reroute", "off")
_FLAGS = {
    "--triage-store": "store",
    "--triage-unit": "unit",
    "--triage-gate": "gate",
    "--triage-funcs": "funcs",
}
_SWITCHES = {"--triage-reweight": "reweight", "--gunicorn": "gunicorn"}
_stock: dict[str, Any] = {}  # lightrag.api.lightrag_server's own create_app / get_application


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """What the triage side of the server is configured with (see the module docstring)."""

    store: str | None = None
    reweight: bool = False
    unit: str = "triple"
    gate: str = "warn"
    funcs: str | None = None
    gunicorn: bool = False

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ConfigError(f"TRIAGE_UNIT / --triage-unit must be 'triple' or 'chunk', got {self.unit!r}")
        if self.gate not in GATES:
            raise ConfigError(
                f"TRIAGE_GATE / --triage-gate must be one of {', '.join(GATES)}, got {self.gate!r}"
            )
        if self.funcs is not None and ":" not in self.funcs:
            raise ConfigError(
                f"TRIAGE_LIGHTRAG_FUNCS / --triage-funcs must be 'module:callable', got {self.funcs!r}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: Any) -> ServerOptions:
        """Options from ``TRIAGE_*`` variables, overridden by ``given`` (the flags)."""
        env = os.environ if env is None else env
        raw = env.get("TRIAGE_REWEIGHT", "").strip().lower()
        if raw not in ("", "0", "1", "true", "false", "yes", "no", "on", "off"):
            raise ConfigError(f"TRIAGE_REWEIGHT must be 1 or 0, got {raw!r}")
        values: dict[str, Any] = {
            "store": env.get("TRIAGE_STORE_URL") or env.get("TRIAGE_STORE") or None,
            "reweight": raw in ("1", "true", "yes", "on"),
            "unit": env.get("TRIAGE_UNIT") or "triple",
            "gate": env.get("TRIAGE_GATE") or "warn",
            "funcs": env.get("TRIAGE_LIGHTRAG_FUNCS") or None,
        }
        values.update({k: v for k, v in given.items() if v is not None})
        return cls(**values)

    def config(self) -> Any:
        """The owned manager's :class:`~triage_plugins.contract.config.TriageConfig`."""
        from triage_plugins.contract.config import TriageConfig

        options = {} if self.gate == "off" else {"gate.mode": self.gate}
        return TriageConfig(reweight=self.reweight, unit=self.unit, gate=self.gate != "off", options=options)  # type: ignore[arg-type]


def split_argv(argv: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Take the ``--triage-*`` / ``--gunicorn`` flags out of ``argv``; the rest is LightRAG's."""
    given: dict[str, Any] = {}
    rest: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        arg = items[i]
        name, eq, value = arg.partition("=")
        if name in _FLAGS:
            if not eq:
                if i + 1 >= len(items):
                    raise ConfigError(f"{name} needs a value")
                i, value = i + 1, items[i + 1]
            given[_FLAGS[name]] = value
        elif arg in _SWITCHES:
            given[_SWITCHES[arg]] = True
        else:
            rest.append(arg)
        i += 1
    return given, rest


def load_functions(spec: str | None, args: Any) -> dict[str, Any]:
    """``LightRAG(...)`` overrides from ``module:callable`` (called with LightRAG's parsed args)."""
    if not spec:
        return {}
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"TRIAGE_LIGHTRAG_FUNCS={spec!r} cannot be loaded: {exc}") from None
    overrides = factory(args)
    if not isinstance(overrides, Mapping) or not all(isinstance(k, str) for k in overrides):
        raise ConfigError(f"{spec} must return a mapping of LightRAG(...) keyword arguments")
    return dict(overrides)


# ---------------------------------------------------------------------------- the app


def create_app(args: Any, options: ServerOptions | None = None) -> Any:
    """LightRAG's ``create_app(args)`` with the instance instrumented and the ``/triage`` routes.

    ``options`` default to :meth:`ServerOptions.from_env`. The app's ``state.triage`` is the
    :class:`TriageServerState` (its ``inst`` is set while the app is running).
    """
    options = options or ServerOptions.from_env()
    if isinstance(args, argparse.Namespace):
        from lightrag.api.config import initialize_config

        # lightrag.api reads global_args at import (auth) and in its routes: these args, not sys.argv
        initialize_config(args, force=True)
    server = _server_module()
    overrides = load_functions(options.funcs, args)
    captured: list[Any] = []
    with _capturing(server, overrides, captured):
        app = _stock["create_app"](args)
    if len(captured) != 1:
        raise TriageError(f"lightrag-server built {len(captured)} LightRAG instances; expected one")
    state = TriageServerState(captured[0], options, args)
    app.state.triage = state
    _wrap_lifespan(app, state)
    app.add_middleware(QueryIdMiddleware)
    from triage_lightrag.server_routes import triage_router

    api_key = os.getenv("LIGHTRAG_API_KEY") or getattr(args, "key", None)
    app.include_router(triage_router(state, api_key))
    return app


def get_application(args: Any = None) -> Any:
    """Gunicorn's factory (``lightrag-gunicorn`` loads ``get_application``), instrumented."""
    if args is None:
        from lightrag.api.config import global_args

        args = global_args
    return create_app(args)


def _server_module() -> Any:
    import lightrag.api.lightrag_server as server

    if not _stock:
        _stock["create_app"] = server.create_app
        _stock["get_application"] = server.get_application
    return server


@contextlib.contextmanager
def _capturing(server: Any, overrides: Mapping[str, Any], captured: list[Any]) -> Any:
    """Swap the module's ``LightRAG`` (and the embedding factory) for capturing factories, then restore."""
    real = server.LightRAG
    real_embedding = server.create_embedding_function_from_args

    def factory(*a: Any, **kwargs: Any) -> Any:
        kwargs.update(overrides)
        if "llm_model_func" in overrides and "role_llm_configs" not in overrides:
            # the server's per-role functions call its provider: let every role use the override
            kwargs["role_llm_configs"] = {
                name: dataclasses.replace(cfg, func=None)
                for name, cfg in (kwargs.get("role_llm_configs") or {}).items()
            }
        rag = real(*a, **kwargs)
        captured.append(rag)
        return rag

    server.LightRAG = factory
    if "embedding_func" in overrides:
        server.create_embedding_function_from_args = lambda *_a, **_k: overrides["embedding_func"]
    # create_app() builds a per-role function for the configured provider (importing its
    # lightrag.llm.<provider> module) that the factory above discards: with your own llm_model_func,
    # a placeholder stands in for that module while create_app runs, so no provider is imported.
    placeholders = _provider_placeholders() if "llm_model_func" in overrides else []
    try:
        yield
    finally:
        server.LightRAG = real
        server.create_embedding_function_from_args = real_embedding
        for name in placeholders:
            sys.modules.pop(name, None)


PROVIDERS = ("openai", "azure_openai", "ollama", "lollms", "bedrock", "gemini", "jina", "voyageai")


def _provider_placeholders() -> list[str]:
    """Put a placeholder module for each ``lightrag.llm.<provider>`` not imported yet; their names."""
    import types

    def unused(*_a: Any, **_k: Any) -> Any:
        raise TriageError("this provider function was replaced by TRIAGE_LIGHTRAG_FUNCS and is never called")

    added = []
    for provider in PROVIDERS:
        name = f"lightrag.llm.{provider}"
        if name in sys.modules:
            continue
        module = types.ModuleType(name, "placeholder while triage_lightrag.server builds the app")
        module.__getattr__ = lambda attr, _u=unused: _u  # type: ignore[method-assign]
        sys.modules[name] = module
        added.append(name)
    return added


def _wrap_lifespan(app: Any, state: TriageServerState) -> None:
    """Instrument after LightRAG's own start-up (storages ready), in the serving process."""
    stock = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[Any]:
        async with stock(app_) as value:
            await asyncio.to_thread(state.start)
            try:
                yield value
            finally:
                await asyncio.to_thread(state.stop)

    app.router.lifespan_context = lifespan


class TriageServerState:
    """The instrumented instance of one serving process (one per gunicorn worker).

    :ivar inst: the :class:`~triage_lightrag.instrument.LightRAGInstrumentor` while serving, else ``None``.
    """

    def __init__(self, rag: Any, options: ServerOptions, args: Any) -> None:
        self.rag = rag
        self.options = options
        self.args = args
        self.inst: Any = None
        self.pid: int | None = None

    @property
    def store_target(self) -> str:
        if self.options.store:
            return self.options.store
        return os.path.join(str(getattr(self.args, "working_dir", ".")), "triage.sqlite")

    def start(self) -> None:
        from triage_lightrag.instrument import LightRAGInstrumentor

        inst = LightRAGInstrumentor().instrument(
            self.rag, store=self.store_target, config=self.options.config()
        )
        inst.manager.start_run(
            "lightrag-server",
            {
                "pid": os.getpid(),
                "reweight": self.options.reweight,
                "unit": self.options.unit,
                "gate": self.options.gate,
            },
        )
        self.inst, self.pid = inst, os.getpid()
        log.info("triage: instrumented LightRAG in process %d (store %s)", self.pid, self.store_target)

    def stop(self) -> None:
        inst, self.inst = self.inst, None
        if inst is not None:
            inst.uninstrument()  # closes the owned manager: delivers what is queued, stops its thread


class QueryIdMiddleware:
    """Pure ASGI middleware: a fresh query id for every ``/query*`` request, in force while the
    route (and its streamed body) runs, returned as ``X-Triage-Query-Id``."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope.get("type") != "http" or not _is_query_path(scope):
            await self.app(scope, receive, send)
            return
        from triage_plugins.adapter_kit.query_ids import new_query_id, using_query_id

        qid = new_query_id("lightrag")
        header = (b"x-triage-query-id", qid.encode("ascii"))

        async def send_with_id(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        with using_query_id(qid):
            await self.app(scope, receive, send_with_id)


def _is_query_path(scope: Mapping[str, Any]) -> bool:
    path = str(scope.get("path") or "")
    root = str(scope.get("root_path") or "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path == "/query" or path.startswith("/query/")


# ---------------------------------------------------------------------------- the command


TRIAGE_HELP = """\
triage-lightrag-server: lightrag-server with its LightRAG instance instrumented
by triage-plugins. It records every query's retrieval and answer (events,
metrics, the chain signature) in a store and can learn from feedback. Every
lightrag-server argument listed after this text works as there; these are added
(a flag wins over its environment variable):

  --triage-store PATH_OR_URL
        where events, metrics and learned scores go: a SQLite file or a
        postgresql:// URL (TRIAGE_STORE_URL; default TRIAGE_STORE, else
        triage.sqlite in LightRAG's --working-dir)
  --triage-reweight
        learn from feedback and rerank LightRAG's retrieval (TRIAGE_REWEIGHT=1);
        off by default: answers are exactly lightrag-server's
  --triage-unit triple|chunk
        what feedback scores (TRIAGE_UNIT; default triple)
  --triage-gate warn|reroute|off
        the check between retrieval and answer (TRIAGE_GATE): warn, the default,
        only records its decision; reroute retrieves once more with its
        suggestion (a wider top-k, another mode); off skips it
  --triage-funcs MODULE:CALLABLE
        a function returning your own LLM, embedding and tokenizer for LightRAG
        (TRIAGE_LIGHTRAG_FUNCS)
  --gunicorn
        serve with lightrag-gunicorn (each worker instruments its own instance)

Added routes: POST /triage/feedback {"query_id": ..., "score": 0..1} rates an
answer; GET /triage/summary gives recent metrics. Every /query* response carries
an X-Triage-Query-Id header naming the query to rate.

Examples:

  triage-lightrag-server --port 9621 --working-dir ./rag_storage
  triage-lightrag-server --triage-reweight --triage-store triage.sqlite
  triage report ./rag_storage/triage.sqlite
"""


def main(argv: Sequence[str] | None = None) -> None:
    """``triage-lightrag-server [lightrag-server arguments] [--triage-* flags] [--gunicorn]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(TRIAGE_HELP)  # then lightrag-server's own help, from its parser
    try:
        given, rest = split_argv(args)
        options = ServerOptions.from_env(**given)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    sys.argv = [sys.argv[0] if sys.argv else "triage-lightrag-server", *rest]  # lightrag.api reads it
    server = _server_module()
    # The launcher's own process: LightRAG's main() and gunicorn's loader look these names up here.
    server.create_app = lambda args: create_app(args, options)
    server.get_application = lambda args=None: create_app(
        args if args is not None else _global_args(), options
    )
    try:
        if options.gunicorn:
            from lightrag.api.run_with_gunicorn import main as gunicorn_main

            gunicorn_main()
        else:
            server.main()
    except TriageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _global_args() -> Any:
    from lightrag.api.config import global_args

    return global_args


if __name__ == "__main__":
    main()
