"""What every command that starts an operation shares, declared once.

`@run_options()` gives a Typer command the options `--dry-run`, `--yes`, `--no-wait`, `--timeout`
and `--output`, after its own and in that order, and hands them to it as one `RunOptions` (its
keyword-only `run` parameter). `RunOptions.operate` then starts the operation through the fleet's
claim (`start_operation`), prints its UI link, follows it and exits with its code.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from drctl.cli.common import TABLE, DryRunOpt, NoWait, Output, OutputOpt, Timeout, YesOpt

# The Temporal client and the models load when an operation runs, not for -h or Tab completion.
if TYPE_CHECKING:
    from pydantic import BaseModel

    from drctl.cli.launch import Launched, Starter
    from drctl.config.schema import FleetConfig

M = TypeVar("M", bound="BaseModel")  # drctl.client.outcome.M, without importing pydantic here


@dataclass(frozen=True)
class RunOptions:
    """How the user asked an operation to run: plan only, unasked, unwatched, watched how long, shown how."""

    dry_run: bool = False
    yes: bool = False
    no_wait: bool = False
    timeout: float | None = None
    output: Output = TABLE

    def launch(
        self,
        cfg: FleetConfig,
        what: str,
        start: Starter,
        result_type: type[M],
        render: Callable[[M, str], None],
        as_json: Callable[[Launched[M]], Any] | None = None,
    ) -> None:
        """Start with `start(client)`, then watch and render the result (nothing more with --no-wait)."""
        from drctl.cli.launch import conclude, launch

        launched = launch(
            cfg, what, start, result_type, no_wait=self.no_wait, output=self.output, timeout_s=self.timeout
        )
        conclude(launched, self.output, render, as_json)

    def operate(
        self,
        cfg: FleetConfig,
        what: str,
        run_fn: Any,
        arg: Any,
        result_type: type[M],
        render: Callable[[M, str], None],
        *,
        operation: str,
        workflow_id: str,
        source: str | None = None,
        target: str | None = None,
        memo: Mapping[str, Any] | None = None,
        as_json: Callable[[Launched[M]], Any] | None = None,
    ) -> None:
        """`launch` a mutating operation: workflow `run_fn(arg)`, started under the fleet's claim."""

        from drctl.client.operations import start_operation

        def start(client: Any) -> Any:
            return start_operation(
                client,
                cfg,
                run_fn,
                arg,
                operation=operation,
                workflow_id=workflow_id,
                source=source,
                target=target,
                memo=memo,
            )

        self.launch(cfg, what, start, result_type, render, as_json)


def run_options(
    *, yes: bool = True, dry_run: Any = DryRunOpt
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add the RunOptions options to a command; `yes=False` leaves out --yes (nothing to confirm),
    `dry_run` is the --dry-run option's annotation, for a command whose dry run says more."""
    options: list[tuple[str, Any, Any]] = [("dry_run", dry_run, False)]
    if yes:
        options.append(("yes", YesOpt, False))
    options += [("no_wait", NoWait, False), ("timeout", Timeout, None), ("output", OutputOpt, TABLE)]

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        # Typer reads the command's parameters from its signature and their types from its annotations:
        # both are given resolved, so its own `from __future__ import annotations` strings never reach it.
        hints = get_type_hints(fn, include_extras=True)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(fn).parameters.values()
            if p.name != "run"
        ]
        added = [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d)
            for n, a, d in options
        ]

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> None:
            run = RunOptions(**{n: kwargs.pop(n) for n, _, _ in options if n in kwargs})
            fn(*args, **kwargs, run=run)

        params = own + added
        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return wrap
