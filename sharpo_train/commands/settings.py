"""`sharpo settings [PREFIX] [--command train|sft|demo|compare] [--markdown]`: every setting a
command takes as ``key=value``, with its type, default, range and one-line help, read from
the settings classes themselves (settings/describe.py): the trainer's Config
(loops/train_config.py) with every registered estimator's ``estimator.*`` and every
environment's ``env.*``, `sharpo sft`'s SFTConfig (loops/sft.py), `sharpo demo` /
`sharpo compare`'s ``demo.*`` (recipes/recipe_config.py, with each environment's own).
PREFIX keeps the keys that start with it (``sharpo settings estimator.``). `sharpo train
--help` ends with the same list; docs/training.md's settings table is this command's
``--markdown`` output (a test keeps them equal)."""
from __future__ import annotations

import argparse
import dataclasses
import sys

COMMANDS = ("train", "sft", "demo", "compare")


def register(subparsers) -> None:
    p = subparsers.add_parser("settings", help="list every setting: type, default, range, help",
                              description=__doc__)
    p.add_argument("prefix", nargs="?", default="", help="only keys that start with this")
    p.add_argument("--command", choices=COMMANDS, default="train",
                   help="whose settings (default: train)")
    p.add_argument("--markdown", action="store_true", help="a markdown table")
    p.set_defaults(func=run)


def env_rows() -> list:
    """``env.name`` and every environment's own ``env.<key>``: the rows of its settings
    class (EnvSpec.settings_class: type, default, range and help, settings/describe.py)."""
    from ..envs.registry import DEFAULT_ENV, env_names, get_spec
    from ..settings.describe import SettingRow, setting_rows as rows_of

    rows = [SettingRow("env.name", "str", DEFAULT_ENV, f"one of {env_names()}",
                       "the environment; its own env.<key> settings follow")]
    for name in env_names():
        rows += [r._replace(help=f"(env.name={name}) {r.help}")
                 for r in rows_of(get_spec(name).settings_class(), "env.")]
    return rows


def setting_rows(command: str = "train") -> list:
    """The rows of ``command``'s settings (a SettingRow per key)."""
    from ..settings.describe import setting_rows as rows_of

    if command == "train":
        from ..loops.train_config import Config
        rows = rows_of(Config())
        at = next(i for i, r in enumerate(rows) if r.key.startswith("rollout."))
        return rows[:at] + env_rows() + rows[at:]
    if command == "sft":
        from ..loops.sft import SFTConfig
        return rows_of(SFTConfig())
    from ..envs.registry import recipe_envs
    from ..recipes.recipe_config import CompareConfig, DemoConfig, settings_class
    base = CompareConfig if command == "compare" else DemoConfig
    own = {f.name for f in dataclasses.fields(CompareConfig)} - \
        {f.name for f in dataclasses.fields(DemoConfig)}
    # CompareConfig's own fields are given as options (--seeds, --methods), not demo.<key>
    rows = [r._replace(key=f"--{r.key[5:]}") if r.key[5:] in own else r
            for r in rows_of(base(), "demo.")]
    seen = {r.key for r in rows}
    for env in recipe_envs():          # each environment's own demo.<key> settings
        for r in rows_of(settings_class(env, base)(), "demo."):
            if r.key not in seen:
                seen.add(r.key)
                rows.append(r._replace(help=f"(demo.env={env}) {r.help}"))
    return rows


def run(args) -> int:
    from ..errors import did_you_mean
    from ..settings.describe import rows_markdown, rows_text

    every = setting_rows(args.command)
    rows = [r for r in every if r.key.startswith(args.prefix)]
    if not rows:
        # the nearest key or section ("rolout." -> "rollout.", "optim.lrr" -> "optim.lr")
        sections = {r.key[:i + 1] for r in every for i, ch in enumerate(r.key) if ch == "."}
        near = did_you_mean(args.prefix, sorted({r.key for r in every} | sections))
        print(f"sharpo settings: no {args.command} setting starts with {args.prefix!r}{near}",
              file=sys.stderr)
        return 2
    print(rows_markdown(rows) if args.markdown else rows_text(rows))
    return 0


class SettingsHelp(argparse.Action):
    """``-h/--help`` of a command that takes ``key=value`` settings: the usual help, then
    every setting (built only when asked: it imports the settings classes)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show this help message and every key=value setting, and exit",
                 command: str = "train"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.command = command

    def __call__(self, parser, namespace, values, option_string=None):
        from ..settings.describe import rows_text

        parser.print_help()
        print(f"\nsettings (key=value; `sharpo settings --command {self.command} [PREFIX]`):")
        print(rows_text(setting_rows(self.command)))
        if self.command in ("demo", "compare"):
            print("  sft.<key>: `sharpo settings --command sft`; trainer keys: `sharpo "
                  "settings`")
        parser.exit()


# docs/training.md, "Every setting": one generated table per command between these markers
DOCS_BEGIN = "<!-- sharpo settings --command {command} --markdown: begin (generated) -->"
DOCS_END = "<!-- sharpo settings --command {command} --markdown: end -->"


def docs_block(command: str) -> str:
    """The markers and the markdown table of ``command``'s settings, as in docs/training.md."""
    from ..settings.describe import rows_markdown
    return "\n".join([DOCS_BEGIN.format(command=command), rows_markdown(setting_rows(command)),
                      DOCS_END.format(command=command)])


def write_docs(path) -> None:
    """Replace every generated settings table of the markdown file ``path`` with the
    current one (``python -c "from sharpo_train.commands.settings import write_docs;
    write_docs('docs/training.md')"``)."""
    from pathlib import Path
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    for command in COMMANDS:
        begin, end = DOCS_BEGIN.format(command=command), DOCS_END.format(command=command)
        if begin in text:
            a, b = text.index(begin), text.index(end) + len(end)
            text = text[:a] + docs_block(command) + text[b:]
    p.write_text(text, encoding="utf-8")


def add_settings_parser(subparsers, command: str, help: str, description: str,
                        settings: str = ""):
    """The parser of a command that takes ``key=value`` settings: its ``-h/--help`` ends
    with every setting of ``settings`` (one of ``COMMANDS``; default ``command`` itself:
    `sharpo eval` takes the trainer's, ``SettingsHelp``)."""
    p = subparsers.add_parser(command, help=help, description=description, add_help=False)
    p.add_argument("-h", "--help", action=SettingsHelp, command=settings or command)
    return p
