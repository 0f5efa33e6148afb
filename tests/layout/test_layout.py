"""The tree's rules, checked on the sources (no build needed):

* the launcher's areas include each other in one direction only (launcher/CMakeLists.txt gives
  the order; an arrow back up or sideways is named with its file and line); an area may have
  sub-areas (watch/fr, watch/probe), each an area of its own in the table;
* the top level keeps common <- rendezvous <- launcher, runtime (runtime never includes launcher,
  nor the reverse; common includes none of ours);
* no Catch2 test name holds a ';': catch_discover_tests splits names at ';' (a CMake list
  separator), so such a test ran as two filters that matched nothing and "passed" in 0 s.
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = (".cpp", ".hpp", ".h", ".cc")

# Area -> the areas it may include (besides itself). "" is the launcher's root (main, --dry-run,
# --dump_stacks, the backend choice). A sub-area ("watch/fr": launcher/watch/fr/) is an area of its
# own: its parent includes it like any area below, and it never includes its parent.
LAUNCHER_AREAS = {
    "": {"cli", "agent", "status", "events", "watch", "report", "health", "workers", "etcd", "rdzv", "topology",
         "config", "fleet", "kubeflow", "replicas"},
    "kubeflow": {"events", "watch", "etcd", "report", "workers", "rdzv", "config"},
    "replicas": {"config"},
    "cli": {"rdzv", "config"},
    "fleet": {"rdzv", "config"},
    "agent": {"status", "events", "watch", "report", "health", "workers", "rdzv", "topology", "config"},
    "status": {"events", "watch", "watch/fr", "watch/probe", "report", "workers", "rdzv", "config"},
    "events": {"report", "workers", "rdzv", "config"},
    "watch": {"watch/fr", "watch/probe", "workers", "rdzv", "config"},
    "watch/fr": {"watch/probe"},
    "watch/probe": set(),
    "report": {"workers", "rdzv", "config"},
    "health": {"workers", "rdzv", "config"},
    "workers": {"rdzv", "config"},
    "etcd": {"rdzv", "config"},
    "rdzv": {"config"},
    "topology": {"config"},
    "config": set(),
}

# Top-level library -> the libraries of ours it may include.
TOP_LEVEL = {
    "common": set(),
    "rendezvous": {"common"},
    "launcher": {"rendezvous", "common"},
    "runtime": {"rendezvous", "common"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def includes(path):
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield number, m.group(1)


def sources(folder):
    return sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in SOURCES)


def launcher_area(path):
    """The folder below launcher/ ("watch", "watch/fr"; "" for the root): every folder is an area."""
    return "/".join(path.relative_to(ROOT / "launcher").parts[:-1])


def test_launcher_areas_point_one_way():
    bad = []
    for path in sources("launcher"):
        area = launcher_area(path)
        assert area in LAUNCHER_AREAS, f"{path.relative_to(ROOT)}: area '{area}' is not in the table above"
        for number, target in includes(path):
            parts = target.split("/")
            if parts[0] != "launcher":
                continue
            to = "/".join(parts[1:-1])
            if to != area and to not in LAUNCHER_AREAS[area]:
                bad.append(f"{path.relative_to(ROOT)}:{number}: {area or '(root)'} -> {to or '(root)'} ({target})")
    assert not bad, "includes that point against the launcher's direction:\n" + "\n".join(bad)


def test_no_circle_in_the_launcher_table():
    # The table itself must be a partial order: follow every arrow and never come back.
    def reach(area, seen):
        for to in LAUNCHER_AREAS[area]:
            assert to not in seen, f"circle through {to}"
            reach(to, seen | {to})

    for area in LAUNCHER_AREAS:
        reach(area, {area})


def test_top_level_direction():
    bad = []
    for lib, allowed in TOP_LEVEL.items():
        for path in sources(lib):
            for number, target in includes(path):
                head = target.split("/")[0]
                if head == "ddplaunch":  # installed public headers: ddplaunch/<lib>/x.hpp or ddplaunch/x.hpp (runtime)
                    parts = target.split("/")
                    head = parts[1] if len(parts) > 2 else "runtime"
                if head in TOP_LEVEL and head != lib and head not in allowed:
                    bad.append(f"{path.relative_to(ROOT)}:{number}: {lib} -> {head} ({target})")
    assert not bad, "includes against common <- rendezvous <- launcher, runtime:\n" + "\n".join(bad)


# The macro, then the name: one string literal or several that the compiler joins.
TEST_NAME = re.compile(r'\b(?:TEST_CASE|SCENARIO|TEMPLATE_TEST_CASE)\s*\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def test_no_semicolon_in_catch_test_names():
    names = []
    bad = []
    for path in sorted((ROOT / "tests").rglob("*.cpp")):
        text = path.read_text(errors="replace")
        for m in TEST_NAME.finditer(text):
            name = "".join(LITERAL.findall(m.group(1)))
            names.append(name)
            if ";" in name:
                line = text[: m.start()].count("\n") + 1
                bad.append(f"{path.relative_to(ROOT)}:{line}: \"{name}\"")
    assert len(names) > 100, f"found only {len(names)} test names: the pattern no longer matches the suites"
    assert not bad, "Catch2 test names with ';' (ctest would run nothing for them; use ','):\n" + "\n".join(bad)
