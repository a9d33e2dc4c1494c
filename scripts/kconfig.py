"""Kconfig helpers shared by ./configure and the Makefile front end.

Every entry point treats Kconfiglib warnings (undefined symbols, values that did not
stick) as errors, the way Zephyr's kconfig.py and Buildroot's check-dotconfig do.
Runs under /usr/bin/python3 (Debian's python3-kconfiglib)."""
import os
import random
import sys

DIST_PACKAGES = "/usr/lib/python3/dist-packages"
if DIST_PACKAGES not in sys.path:
    sys.path.append(DIST_PACKAGES)

try:
    import kconfiglib
except ImportError:  # pragma: no cover - reported to the user
    kconfiglib = None


class ConfigError(Exception):
    pass


def require_kconfiglib():
    if kconfiglib is None:
        raise ConfigError("Kconfiglib not found: install the Debian package python3-kconfiglib "
                          "(apt-get install python3-kconfiglib, or ./configure --install-deps)")


def load_kconfig(srcdir):
    require_kconfiglib()
    old = os.getcwd()
    os.chdir(srcdir)
    try:
        os.environ.setdefault("srctree", srcdir)
        kconf = kconfiglib.Kconfig("Kconfig", warn_to_stderr=False, suppress_traceback=False)
    except kconfiglib.KconfigError as e:
        raise ConfigError(f"Kconfig: {e}")
    finally:
        os.chdir(old)
    kconf.warn_assign_undef = True     # a typo in a defconfig names its symbol
    kconf.warn_assign_override = True  # the same symbol assigned twice
    if kconf.warnings:
        raise ConfigError("Kconfig tree has warnings:\n  " + "\n  ".join(kconf.warnings))
    return kconf


def _user_values_that_did_not_stick(kconf):
    problems = []
    for sym in kconf.unique_defined_syms:
        if sym.user_value is None or sym.choice:
            continue
        want = sym.user_value
        if sym.orig_type in (kconfiglib.BOOL, kconfiglib.TRISTATE):
            want = kconfiglib.TRI_TO_STR[want]
        if sym.str_value != want and not any(n.prompt for n in sym.nodes):
            problems.append(f"{kconf.config_prefix}{sym.name} was set to '{want}' but is "
                            f"'{sym.str_value}': it is a board fact (no prompt), set only by the "
                            f"board's boards/<name>/Kconfig; pick the board instead")
        elif sym.str_value != want:
            problems.append(f"{kconf.config_prefix}{sym.name} was set to '{want}' but is "
                            f"'{sym.str_value}' (unmet dependencies: "
                            f"{kconfiglib.expr_str(sym.direct_dep)})")
    for choice in kconf.unique_choices:
        if choice.user_selection is not None and choice.selection is not choice.user_selection:
            problems.append(f"choice {choice.name}: {choice.user_selection.name} did not stick")
    return problems


def load_config(kconf, path, strict=True, drop_removed=False):
    """Load a .config or defconfig; warnings and values that did not stick are errors. With
    drop_removed (olddefconfig: bringing an older configuration up to date), values of
    symbols the Kconfig tree no longer defines are dropped with a note instead."""
    if not os.path.exists(path):
        raise ConfigError(f"{path}: no such configuration (run `make <board>_defconfig`)")
    kconf.warnings.clear()
    kconf.load_config(path, replace=True)
    problems = list(kconf.warnings)
    if drop_removed:
        removed = [w for w in problems if "undefined symbol" in w]
        for w in removed:
            print(f"kconfig: note: {w.split('warning: ', 1)[-1]} (no longer in the Kconfig "
                  "tree: dropped)", file=sys.stderr)
        problems = [w for w in problems if w not in removed]
    if strict:
        problems += _user_values_that_did_not_stick(kconf)
    if problems:
        raise ConfigError(f"{path}:\n  " + "\n  ".join(problems))


def check_combinations(kconf):
    """Guard, mirrors config_check.h: the Kconfig tree (depends on, hidden helpers, choices)
    lets no menu, randconfig, allyesconfig or allnoconfig reach these; they can only come from
    a hand-edited config that configure loads or from a board fragment's facts."""
    sym = kconf.syms
    y = lambda name: name in sym and sym[name].str_value == "y"
    errors = []
    if y("VKRT_COLLECTIVES") and not (y("VKRT_TRANSPORT_NATIVE_FD") or y("VKRT_TRANSPORT_CPU_PROXY")
                                      or y("VKRT_TRANSPORT_HOST_STAGED")):
        errors.append("CONFIG_VKRT_COLLECTIVES=y needs at least one transport: enable "
                      "CONFIG_VKRT_TRANSPORT_NATIVE_FD, CONFIG_VKRT_TRANSPORT_CPU_PROXY or "
                      "CONFIG_VKRT_TRANSPORT_HOST_STAGED")
    board = sym["VKRT_BOARD"].str_value if "VKRT_BOARD" in sym else "?"
    if not board or not sym["VKRT_DEVICE_COUNT"].str_value:
        errors.append(f"board '{board}': its boards/<name>/Kconfig must set VKRT_BOARD and "
                      "VKRT_DEVICE_COUNT")
    if y("VKRT_DEVICE_MATCH_UUID"):
        uuids = [u.strip() for u in sym["VKRT_DEVICE_UUIDS"].str_value.split(",") if u.strip()]
        count = int(sym["VKRT_DEVICE_COUNT"].str_value or 0)
        if len(uuids) != count:
            errors.append(f"CONFIG_VKRT_DEVICE_UUIDS lists {len(uuids)} UUIDs but "
                          f"CONFIG_VKRT_DEVICE_COUNT is {count}")
        for u in uuids:
            h = u.replace("-", "")
            if len(h) != 32 or any(c not in "0123456789abcdefABCDEF" for c in h):
                errors.append(f"CONFIG_VKRT_DEVICE_UUIDS: '{u}' is not 32 hex digits")
    if errors:
        raise ConfigError("impossible configuration:\n  " + "\n  ".join(errors))


def randomize(kconf, seed):
    """Seeded randconfig: random values for every visible symbol and choice, in menu order."""
    rng = random.Random(seed)
    kconf.unset_values()
    for _ in range(3):  # later symbols can become visible after earlier ones are set
        for node in kconf.node_iter():
            item = node.item
            if isinstance(item, kconfiglib.Choice):
                if item.visibility and item.syms:
                    visible = [s for s in item.syms if s.visibility]
                    if visible:
                        item.set_value(2)
                        rng.choice(visible).set_value(2)
            elif isinstance(item, kconfiglib.Symbol) and item.visibility and not item.choice:
                if item.orig_type == kconfiglib.BOOL:
                    item.set_value(rng.choice(("y", "n")))
                elif item.orig_type == kconfiglib.INT and item.ranges:
                    lo, hi = item.ranges[0][0], item.ranges[0][1]
                    lo, hi = int(lo.str_value), int(hi.str_value)
                    # Keep sizes small so random builds stay cheap to test.
                    item.set_value(str(rng.randint(lo, min(hi, lo + 8))))


BOARD_FACTS = ("VKRT_BOARD", "VKRT_DEVICE_COUNT", "VKRT_SIMULATED", "VKRT_DEVICE_MATCH_ID",
               "VKRT_DEVICE_MATCH_UUID", "VKRT_DEVICE_MATCH_INDEX", "VKRT_DEVICE_VENDOR_ID",
               "VKRT_DEVICE_DEVICE_ID", "VKRT_DEVICE_UUIDS")


def lint(kconf):
    """House rules of the Kconfig tree: `select` only hidden helpers (a selected prompt would
    override what the user answered), and board facts are never prompts."""
    errors = []
    for sym in kconf.unique_defined_syms:
        for target, _cond in sym.selects:
            if any(n.prompt for n in target.nodes):
                errors.append(f"{sym.name} selects {target.name}, which has a prompt: select a "
                              "hidden helper and let the prompted symbol follow it")
    for name in BOARD_FACTS:
        if name in kconf.syms and any(n.prompt for n in kconf.syms[name].nodes):
            errors.append(f"board fact {name} has a prompt: set it in boards/<name>/Kconfig")
    if errors:
        raise ConfigError("Kconfig house rules:\n  " + "\n  ".join(errors))


def write_min_config(kconf, path):
    """savedefconfig, always naming the board: the one choice a defconfig must not leave to
    the choice's default (boards/<name>/defconfig stays self-describing)."""
    msg = kconf.write_min_config(path)
    choice = next((c for c in kconf.unique_choices if c.name == "VKRT_BOARD_CHOICE"), None)
    if choice is not None and choice.selection is not None:
        line = f"{kconf.config_prefix}{choice.selection.name}=y\n"
        text = open(path).read()
        if line not in text.splitlines(keepends=True):
            open(path, "w").write(line + text)
    return msg


def main(argv):
    import argparse
    p = argparse.ArgumentParser(description="libvkrt Kconfig front end (warnings are errors)")
    p.add_argument("--srcdir", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--config", default=".config")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("defconfig"); d.add_argument("defconfig")
    m = sub.add_parser("merge"); m.add_argument("fragment")
    sub.add_parser("olddefconfig")
    s = sub.add_parser("savedefconfig"); s.add_argument("out")
    sub.add_parser("allyesconfig"); sub.add_parser("allnoconfig")
    r = sub.add_parser("randconfig"); r.add_argument("--seed", type=int, required=True)
    sub.add_parser("check")
    sub.add_parser("lint")
    a = p.parse_args(argv)
    try:
        kconf = load_kconfig(a.srcdir)
        if a.cmd == "defconfig":
            load_config(kconf, a.defconfig)
            check_combinations(kconf)
            print(kconf.write_config(a.config))
        elif a.cmd == "merge":
            # a fragment (boards/<name>.config) on top of the configuration in use: its values
            # must stick like a defconfig's
            load_config(kconf, a.config, strict=False)
            kconf.warnings.clear()
            kconf.warn_assign_override = False  # overriding the configuration is the point
            kconf.load_config(a.fragment, replace=False)
            problems = list(kconf.warnings) + _user_values_that_did_not_stick(kconf)
            if problems:
                raise ConfigError(f"{a.fragment}:\n  " + "\n  ".join(problems))
            check_combinations(kconf)
            print(kconf.write_config(a.config))
        elif a.cmd == "olddefconfig":
            load_config(kconf, a.config, strict=False, drop_removed=True)
            print(kconf.write_config(a.config))
        elif a.cmd == "savedefconfig":
            load_config(kconf, a.config, strict=False)
            print(write_min_config(kconf, a.out))
        elif a.cmd in ("allyesconfig", "allnoconfig"):
            kconf.unset_values()
            val = 2 if a.cmd == "allyesconfig" else 0
            for _ in range(3):
                for sym in kconf.unique_defined_syms:
                    if sym.visibility and not sym.choice and sym.orig_type == kconfiglib.BOOL:
                        sym.set_value(val)
            print(kconf.write_config(a.config))
        elif a.cmd == "randconfig":
            randomize(kconf, a.seed)
            print(kconf.write_config(a.config))
        elif a.cmd == "lint":
            lint(kconf)
            print("Kconfig: selects only hidden helpers; board facts have no prompt")
        elif a.cmd == "check":
            load_config(kconf, a.config)
            check_combinations(kconf)
    except ConfigError as e:
        print(f"kconfig: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
