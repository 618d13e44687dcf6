"""``triage-lightrag-server``: the stock ``lightrag-server`` (``lightrag.api``, 1.5.7) with its
``LightRAG`` instance instrumented (docs/lightrag.md, "The server").

Run it where you ran ``lightrag-server``, with the same arguments and ``.env``::

    triage-lightrag-server --port 9621 --working-dir ./rag_storage      # or python -m triage_lightrag.server
    triage-lightrag-server --gunicorn --workers 4                       # lightrag-gunicorn, instrumented

Every route, the web UI and the configuration are LightRAG's own; this module adds

- ``POST /triage/feedback`` ``{"query_id": ..., "score": 0..1, "source": "human"}`` (200 once durable,
  or ``"already recorded"`` for a replay, which changes nothing; 403 for ``source`` ``llm``/``gold``
  without the operator credential; 429 over the per-client rate;
  202 while the answer stream it rates is still open; an id another worker answered is accepted when
  the shared store holds its retrieval; 404 when neither this worker nor the store knows the id;
  422 for a score outside [0, 1] or not finite; ``"learned": false`` in the 200 body for a query
  with no answer to learn from, a ``/query/data`` one);
- ``GET /triage/summary``: recent query metrics (mean per metric, how many undefined), gate decisions,
  drops, failures;
- an ``X-Triage-Query-Id`` header on every ``/query*`` response (streaming included), listed in the
  CORS ``Access-Control-Expose-Headers``: an unguessable id (80 random bits,
  :mod:`triage_lightrag.feedback_guard`).

The learner is the workspace's: scores, parameters and runs live in the scope of LightRAG's
``WORKSPACE`` (``--workspace``) in the store (:mod:`triage_plugins.store.scoped`), so servers of
two workspaces sharing one store keep two learners; the default workspace keeps the default scope.

Options (a flag wins over its variable): ``--triage-store``/``TRIAGE_STORE_URL`` (a path or URL; default
``TRIAGE_STORE``, else ``triage.sqlite`` in LightRAG's ``--working-dir``), ``--triage-reweight``/
``TRIAGE_REWEIGHT=1``, ``--triage-unit``/``TRIAGE_UNIT`` (``triple``/``chunk``),
``--triage-gate``/``TRIAGE_GATE`` (``warn``, the default: record only; ``reroute``; ``off``), and
``--triage-funcs``/``TRIAGE_LIGHTRAG_FUNCS`` = ``module:callable``: called with LightRAG's parsed
arguments, it returns ``LightRAG(...)`` keyword overrides (``llm_model_func``, ``embedding_func``,
``tokenizer``, ...), for bringing your own functions, and for offline tests
(``triage_lightrag.testing:offline_server_functions``); with ``embedding_func`` given, the server's
provider embedding is never built, so no ``lightrag.llm.*`` provider module is imported.
Feedback integrity: ``TRIAGE_OPERATOR_KEY`` (no flag: a secret does not belong on a command line)
admits ``source`` ``llm``/``gold`` from a request carrying it in ``X-Triage-Operator-Key``;
``--triage-feedback-revisions``/``TRIAGE_FEEDBACK_REVISIONS=1`` accepts more than one feedback per
query id and source; ``--triage-feedback-rate``/``TRIAGE_FEEDBACK_RATE=N`` allows N feedback requests
per client address per minute (per serving process).

The variables are read where ``lightrag-server`` reads its own settings, with its precedence: the
process environment, then the ``.env`` file of the current directory (``lightrag.api`` calls
``load_dotenv(".env", override=False)``: a variable already in the environment is not overridden),
then the default. ``--help`` and the serving process's start-up log say where each value came from.

How (LightRAG 1.5.7's ``create_app()`` builds ``rag = LightRAG(...)`` as a local its routers close
over): while :func:`create_app` runs LightRAG's own ``create_app``, the module's ``LightRAG`` name
(and, with an ``embedding_func`` override, ``create_embedding_function_from_args``) are swapped for
factories that capture the instance, then restored. The instance is instrumented in the app's
lifespan, after LightRAG initialized its storages, in the serving process: under
``lightrag-gunicorn`` (app preloaded in the master, then forked) each worker instruments its own
instance with its own manager and worker thread, sharing the store (query ids stay unique: a forked
worker draws its own id tag). ``lightrag.api`` parses
``sys.argv`` on first use, so :func:`main` removes the ``--triage-*`` flags from it first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import difflib
import importlib
import logging
import os
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from triage_plugins import ConfigError, TriageError

__all__ = [
    "Setting",
    "ServerOptions",
    "TriageServerState",
    "create_app",
    "get_application",
    "main",
    "read_settings",
    "split_argv",
]

log = logging.getLogger("triage.lightrag.server")

UNITS = ("triple", "chunk")
GATES = ("warn", "reroute", "off")
_FLAGS = {
    "--triage-store": "store",
    "--triage-unit": "unit",
    "--triage-gate": "gate",
    "--triage-funcs": "funcs",
    "--triage-feedback-rate": "feedback_rate",
}
_SWITCHES = {
    "--triage-reweight": "reweight",
    "--triage-feedback-revisions": "revisions",
    "--gunicorn": "gunicorn",
}
_stock: dict[str, Any] = {}  # lightrag.api.lightrag_server's own create_app / get_application


#: The ``.env`` file ``lightrag.api`` loads (relative to the current directory, like LightRAG's).
ENV_FILE = ".env"
#: ``TRIAGE_*`` variables read by the server or by the manager and store it builds.
KNOWN_VARIABLES = (
    "TRIAGE_STORE_URL", "TRIAGE_STORE", "TRIAGE_REWEIGHT", "TRIAGE_UNIT", "TRIAGE_GATE",
    "TRIAGE_LIGHTRAG_FUNCS", "TRIAGE_HOOK_BUDGET", "TRIAGE_DISABLE_PLUGINS", "TRIAGE_SYNC",
    "TRIAGE_TRACE_PLUGINS", "TRIAGE_STORE_POOL", "TRIAGE_OPERATOR_KEY", "TRIAGE_FEEDBACK_REVISIONS",
    "TRIAGE_FEEDBACK_RATE", "TRIAGE_HEARTBEAT_SECONDS",
)  # fmt: skip
_OPTION_VARIABLES = {
    "store": ("TRIAGE_STORE_URL", "TRIAGE_STORE"),
    "reweight": ("TRIAGE_REWEIGHT",),
    "unit": ("TRIAGE_UNIT",),
    "gate": ("TRIAGE_GATE",),
    "funcs": ("TRIAGE_LIGHTRAG_FUNCS",),
    "operator_key": ("TRIAGE_OPERATOR_KEY",),
    "revisions": ("TRIAGE_FEEDBACK_REVISIONS",),
    "feedback_rate": ("TRIAGE_FEEDBACK_RATE",),
}
_BOOLEANS = ("reweight", "revisions")
#: Variables whose value is never printed (``--help``, the start-up log): a name with one of these words.
SECRET_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD")
_OPTION_FLAGS = {**{v: k for k, v in _FLAGS.items()}, **{v: k for k, v in _SWITCHES.items()}}
_DEFAULT_ENV_FILE: Any = object()  # from_env(): ".env" when reading the process environment


@dataclasses.dataclass(frozen=True)
class Setting:
    """One ``TRIAGE_*`` variable as ``lightrag-server`` would see it, and where it came from."""

    name: str
    value: str
    origin: str  # "environment" or ".env"
    path: str | None = None  # the .env file's absolute path

    def where(self) -> str:
        if self.origin == ".env":
            return f"{self.name} from {self.path}"
        return f"{self.name} from the environment"


def read_settings(
    env: Mapping[str, str] | None = None, env_file: str | os.PathLike[str] | None = ENV_FILE
) -> dict[str, Setting]:
    """Every ``TRIAGE_*`` variable of ``env`` (default ``os.environ``) and ``env_file``, by name.

    LightRAG's precedence (``load_dotenv(".env", override=False)``): a variable of the environment
    wins over the file's line. A variable whose environment value equals the file's is reported
    as coming from ``.env`` (once LightRAG has loaded the file, the two cannot be told apart).
    """
    env = os.environ if env is None else env
    path, lines = _env_file_values(env_file)
    out: dict[str, Setting] = {}
    for name in sorted({*env, *lines}):
        if not name.startswith("TRIAGE_"):
            continue
        if name in env:
            from_file = lines.get(name) == env[name]
            out[name] = Setting(
                name, env[name], ".env" if from_file else "environment", path if from_file else None
            )
        else:
            out[name] = Setting(name, lines[name], ".env", path)
    return out


def _env_file_values(env_file: str | os.PathLike[str] | None) -> tuple[str | None, dict[str, str]]:
    """(absolute path, variables) of a ``.env`` file as python-dotenv's ``load_dotenv(...,
    override=False)`` reads it (same parser, interpolation and ``PYTHON_DOTENV_DISABLED``)."""
    if env_file is None or not os.path.isfile(env_file):
        return None, {}
    try:
        from dotenv import main as dotenv_main
    except ImportError:  # lightrag-hku requires python-dotenv; without it LightRAG reads no .env either
        return None, {}
    disabled = getattr(dotenv_main, "_load_dotenv_disabled", None)
    if disabled is not None and disabled():
        return None, {}
    parsed = dotenv_main.DotEnv(env_file, interpolate=True, override=False, encoding="utf-8").dict()
    return os.path.abspath(env_file), {k: v for k, v in parsed.items() if v is not None}


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """What the triage side of the server is configured with (see the module docstring).

    :ivar origins: option name -> where its value came from (``--triage-gate``, ``TRIAGE_GATE from
        /srv/.env``, ``TRIAGE_GATE from the environment``, ``default``); what :meth:`describe`
        prints. Not part of equality.
    :ivar settings: every ``TRIAGE_*`` variable read (:func:`read_settings`), by name.
    """

    store: str | None = None
    reweight: bool = False
    unit: str = "triple"
    gate: str = "warn"
    funcs: str | None = None
    gunicorn: bool = False
    operator_key: str | None = dataclasses.field(default=None, repr=False)
    revisions: bool = False
    feedback_rate: int | None = None
    origins: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    settings: Mapping[str, Setting] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ConfigError(
                f"TRIAGE_UNIT / --triage-unit must be 'triple' or 'chunk', got {self.unit!r}"
                + self._from("unit")
            )
        if self.gate not in GATES:
            raise ConfigError(
                f"TRIAGE_GATE / --triage-gate must be one of {', '.join(GATES)}, got {self.gate!r}"
                + self._from("gate")
            )
        if self.funcs is not None and ":" not in self.funcs:
            raise ConfigError(
                f"TRIAGE_LIGHTRAG_FUNCS / --triage-funcs must be 'module:callable', got {self.funcs!r}"
                + self._from("funcs")
            )
        rate = self.feedback_rate
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or rate < 1):
            raise ConfigError(
                "TRIAGE_FEEDBACK_RATE / --triage-feedback-rate must be a whole number of feedback "
                f"requests per client per minute (>= 1), got {rate!r}" + self._from("feedback_rate")
            )

    def _from(self, option: str) -> str:
        origin = self.origins.get(option)
        return f" ({origin})" if origin and origin != "default" else ""

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        env_file: str | os.PathLike[str] | None = _DEFAULT_ENV_FILE,
        **given: Any,
    ) -> ServerOptions:
        """Options from ``TRIAGE_*`` variables, overridden by ``given`` (the flags).

        :param env: the variables; default: the process environment, completed by ``env_file``.
        :param env_file: a ``.env`` file whose lines fill in what ``env`` lacks (LightRAG's
            precedence); default :data:`ENV_FILE` (the current directory's, as ``lightrag.api``
            reads it) when ``env`` is not given, else none.
        """
        if env_file is _DEFAULT_ENV_FILE:
            env_file = ENV_FILE if env is None else None
        settings = read_settings(env, env_file)
        values: dict[str, Any] = {}
        origins: dict[str, str] = {}
        for option, names in _OPTION_VARIABLES.items():
            found = next((settings[n] for n in names if n in settings and settings[n].value), None)
            if found is not None:
                values[option], origins[option] = found.value, found.where()
        for option in _BOOLEANS:
            if option in values:
                values[option] = _boolean(values[option], _OPTION_VARIABLES[option][0], origins[option])
        for option, value in given.items():
            if value is not None:
                values[option], origins[option] = value, _OPTION_FLAGS.get(option, "argument")
        if "feedback_rate" in values:
            values["feedback_rate"] = _whole(values["feedback_rate"], origins["feedback_rate"])
        for option in _OPTION_VARIABLES:
            origins.setdefault(option, "default")
        return cls(**values, origins=origins, settings=settings)

    def describe(self, store: str | None = None) -> list[str]:
        """One line per option, ``name = value (where it came from)``, then any other ``TRIAGE_*``
        variable read; ``store``: the resolved store, shown when no store option is set."""
        shown = {
            "store": self.store or store or "<working-dir>/triage.sqlite",
            "reweight": "on" if self.reweight else "off",
            "unit": self.unit,
            "gate": self.gate,
            "funcs": self.funcs or "none",
            "operator_key": "set" if self.operator_key else "not set (feedback as llm or gold is refused)",
            "revisions": "on" if self.revisions else "off (one feedback per query id and source)",
            "feedback_rate": f"{self.feedback_rate} per client per minute" if self.feedback_rate else "off",
        }
        lines = [
            f"{option} = {value}  ({self.origins.get(option, 'default')})" for option, value in shown.items()
        ]
        shown_variables = {origin.split(" ", 1)[0] for origin in self.origins.values()}
        for name, setting in self.settings.items():
            if name in shown_variables:
                continue
            option = next((o for o, names in _OPTION_VARIABLES.items() if name in names), None)
            meant = name
            if option is not None:
                note = f"; not used: {self.origins.get(option, 'default')} wins"
            elif name not in KNOWN_VARIABLES:
                close = difflib.get_close_matches(name, KNOWN_VARIABLES, n=1, cutoff=0.85)
                if not close:
                    continue  # another tool's variable (TRIAGE_DATA_DIR, a test's): not ours to judge
                meant, note = close[0], f"; not a variable triage-plugins reads: {close[0]}?"
            else:
                note = ""
            secret = any(w in v for w in SECRET_WORDS for v in (name, meant))  # a misspelt key is a key
            lines.append(f"{name} = {'<hidden>' if secret else setting.value}  ({setting.where()}{note})")
        return lines

    def policy(self) -> Any:
        """The :class:`~triage_lightrag.feedback_guard.FeedbackPolicy` of ``POST /triage/feedback``."""
        from triage_lightrag.feedback_guard import FeedbackPolicy

        return FeedbackPolicy(self.operator_key or None, self.revisions, self.feedback_rate)

    def config(self) -> Any:
        """The owned manager's :class:`~triage_plugins.contract.config.TriageConfig`."""
        from triage_plugins import TriageConfig

        options = {} if self.gate == "off" else {"gate.mode": self.gate}
        return TriageConfig(reweight=self.reweight, unit=self.unit, gate=self.gate != "off", options=options)  # type: ignore[arg-type]


def _boolean(value: Any, variable: str, origin: str) -> bool:
    raw = str(value).strip().lower()
    if raw not in ("", "0", "1", "true", "false", "yes", "no", "on", "off"):
        raise ConfigError(f"{variable} must be 1 or 0, got {raw!r} ({origin})")
    return raw in ("1", "true", "yes", "on")


def _whole(value: Any, origin: str) -> Any:
    """``value`` as an int when it spells one (``ServerOptions`` says what is wrong otherwise)."""
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(
            "TRIAGE_FEEDBACK_RATE / --triage-feedback-rate must be a whole number of feedback requests "
            f"per client per minute, got {value!r} ({origin})"
        ) from None


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
    from triage_lightrag.heartbeat import InFlightMiddleware

    app.add_middleware(InFlightMiddleware, lease=state.lease)  # inside QueryIdMiddleware: sees the id
    app.add_middleware(QueryIdMiddleware)
    _expose_query_id_header(app)
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
        elif "role_llm_configs" not in overrides:  # the stock binding: TCS from its log-probabilities
            from triage_lightrag.logprobs import request_openai_logprobs

            kwargs["role_llm_configs"] = request_openai_logprobs(kwargs.get("role_llm_configs"))
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


QUERY_ID_HEADER = "X-Triage-Query-Id"


def _expose_query_id_header(app: Any) -> None:
    """Add ``X-Triage-Query-Id`` to the ``expose_headers`` of LightRAG's ``CORSMiddleware`` (it
    exposes only ``X-New-Token``), so a browser front-end on another origin can read the id.

    The middleware stack is built on the first request, from ``app.user_middleware``: this edits
    the arguments it will be built with. Without CORS middleware (none configured) nothing changes.
    """
    from starlette.middleware.cors import CORSMiddleware

    for middleware in app.user_middleware:
        if middleware.cls is not CORSMiddleware:
            continue
        exposed = list(middleware.kwargs.get("expose_headers") or ())
        if QUERY_ID_HEADER.lower() not in {h.lower() for h in exposed}:
            middleware.kwargs["expose_headers"] = [*exposed, QUERY_ID_HEADER]


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
        from triage_lightrag.heartbeat import Lease

        self.lease = Lease()  # this process's lease on its run (killed workers are counted)

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
                "workspace": str(getattr(self.rag, "workspace", "") or ""),
                "reweight": self.options.reweight,
                "unit": self.options.unit,
                "gate": self.options.gate,
            },
        )
        self.inst, self.pid = inst, os.getpid()
        self.lease.start(inst.manager.store, inst.manager.run_id, lambda: inst.manager.pending)
        log.info(
            "triage: instrumented LightRAG in process %d (store %s, learner scope %s)",
            self.pid, self.store_target, inst.namespace or "default",
        )  # fmt: skip
        for line in self.options.describe(self.store_target):
            log.info("triage: %s", line)

    def stop(self) -> None:
        self.lease.stop()
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
        from triage_lightrag.feedback_guard import issue_query_id
        from triage_plugins.adapter_kit.query_ids import using_query_id

        qid = issue_query_id("lightrag")
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
(a flag wins over its variable):

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
  --triage-feedback-revisions
        accept a new rating of a query already rated from the same source
        (TRIAGE_FEEDBACK_REVISIONS=1); by default a replay changes nothing
  --triage-feedback-rate N
        at most N feedback requests per client per minute, per process
        (TRIAGE_FEEDBACK_RATE; default unlimited)
  --gunicorn
        serve with lightrag-gunicorn (each worker instruments its own instance)

TRIAGE_OPERATOR_KEY (a variable only): the credential that admits feedback
with source "llm" or "gold", sent in the X-Triage-Operator-Key header; unset,
only a user's own ("human") feedback is accepted.

Each variable is read like lightrag-server's own settings: from the environment,
else from the .env file of the current directory (the environment wins), else
the default. The settings in force here, and where each comes from, are listed
below ("Settings here"), and again in the server's start-up log.

Added routes: POST /triage/feedback {"query_id": ..., "score": 0..1} rates an
answer; GET /triage/summary gives recent metrics. Every /query* response carries
an X-Triage-Query-Id header naming the query to rate. Learning is per
workspace (WORKSPACE / --workspace).

Examples:

  triage-lightrag-server --port 9621 --working-dir ./rag_storage
  triage-lightrag-server --triage-reweight --triage-store triage.sqlite
  triage report ./rag_storage/triage.sqlite
"""


def main(argv: Sequence[str] | None = None) -> None:
    """``triage-lightrag-server [lightrag-server arguments] [--triage-* flags] [--gunicorn]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    wants_help = "-h" in args or "--help" in args
    if wants_help:
        print(TRIAGE_HELP)
    try:
        given, rest = split_argv(args)
        options = ServerOptions.from_env(**given)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if wants_help:  # then lightrag-server's own help, from its parser
        print("Settings here (environment, else ./.env, else default; a flag wins):\n")
        for line in options.describe():  # folded: a long path must not widen the help past 80 columns
            print(
                "\n".join(
                    textwrap.wrap(
                        line,
                        78,
                        initial_indent="  ",
                        subsequent_indent="      ",
                        break_long_words=False,
                        break_on_hyphens=False,
                    )
                )
            )
        print()
    _log_to_stderr()
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


def _log_to_stderr() -> None:
    """Show this module's INFO messages (the start-up settings) next to LightRAG's own, which it
    prints as ``LEVEL: message`` on stderr; unless logging is configured already."""
    if log.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _global_args() -> Any:
    from lightrag.api.config import global_args

    return global_args


if __name__ == "__main__":
    main()
