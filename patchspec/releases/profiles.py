"""Release profiles: what one release looks like to a spec (versions, per-target overrides, fingerprints).

``specs/releases/<release>.yaml`` beside the spec. Overrides replace keys of a target or of one of its
transforms, so the spec stays written for the newest release and older ones say only how they differ.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from patchspec import yamlloc
from patchspec.compiler.kind import ACKNOWLEDGE
from patchspec.compiler.transforms import KINDS
from patchspec.errors import PatchspecError
from patchspec.install import installed
from patchspec.install.root import name_in
from patchspec.model import Loc, Spec
from patchspec.spec import check_transform_syntax, schema_errors, spec_text

FORMAT = 1   # a profile's ``format:``; a profile without one is format 1


@dataclass(frozen=True)
class Pin:
    """What a profile says of one import package: the versions it covers and who may have installed it."""

    versions: SpecifierSet
    distributions: tuple[str, ...]      # normalized distribution names; empty: the import name's own
    ref: str | None = None              # the source ref (git tag, branch) the pin was checked at

    def admits(self, item: installed.Installed) -> bool:
        """Dev and pre-releases count (a vllm-gaudi built from git reports ``0.27.0rc1.dev51+g...``)."""
        wanted = self.distributions or (canonicalize_name(item.package),)
        if item.distribution is not None and item.distribution not in wanted:
            return False
        try:
            return self.versions.contains(Version(item.version), prereleases=True)
        except InvalidVersion:
            return False

    def release(self) -> str | None:
        """The one release the pin's ``==`` clause names (``==0.31.*`` names 0.31.0, the release a
        profile of the line is drafted on), or None."""
        exact = [s.version for s in self.versions if s.operator == "=="]
        return exact[0].replace(".*", ".0") if len(self.versions) == 1 and exact else None

    def describe(self) -> str:
        return ("/".join(self.distributions) + " " if self.distributions else "") + (str(self.versions) or "any")


@dataclass(frozen=True)
class Pins:
    """What ``--release auto`` reads of a profile: its pins and the specs it has a section for."""

    release: str
    packages: dict[str, Pin]
    specs: frozenset[str] | None         # None: a profile of every spec beside it

    def covers(self, spec: str) -> bool:
        return self.specs is None or spec in self.specs

    def matches(self, found: dict[str, installed.Installed]) -> bool:
        """Every package of the profile that is installed is admitted by its pin, and one at least is."""
        present = [name for name in self.packages if name in found]
        return bool(present) and all(self.packages[name].admits(found[name]) for name in present)

    def to_json(self) -> list:
        return [self.release, {n: [str(p.versions), list(p.distributions), p.ref] for n, p in self.packages.items()},
                None if self.specs is None else sorted(self.specs)]

    @classmethod
    def from_json(cls, data: list) -> Pins:
        release, packages, specs = data
        return cls(release, {n: Pin(SpecifierSet(v), tuple(d), ref) for n, (v, d, ref) in packages.items()},
                   None if specs is None else frozenset(specs))


@dataclass(frozen=True)
class Profile:
    release: str
    packages: dict[str, Pin]
    specs: dict | None                   # None: a profile of every spec beside it (no ``specs:`` section)
    path: str
    text: str

    def fingerprints(self, spec: str) -> dict[str, str]:
        return dict((self.specs or {}).get(spec, {}).get("fingerprints", {}))

    @functools.cached_property
    def pins(self) -> Pins:
        return Pins(self.release, self.packages, None if self.specs is None else frozenset(self.specs))

    def covers(self, spec: str) -> bool:
        return self.pins.covers(spec)

    def matches(self, found: dict[str, installed.Installed]) -> bool:
        return self.pins.matches(found)

    def distribution(self, package: str) -> str:
        """The PyPI name to fetch ``package`` by: the first distribution the profile names, else the import name."""
        pin = self.packages.get(package)
        return pin.distributions[0] if pin and pin.distributions else package


def releases_dir(spec_path: str | Path) -> Path:
    return Path(spec_path).resolve().parent / "releases"


def known_releases(directory: Path) -> list[str]:
    return sorted((p.stem for p in directory.glob("*.yaml")), key=release_key)


def release_key(release: str) -> tuple[int, str, Version, str]:
    """Releases in version order where their names end in a version (``v0.26.0``, ``requests-2.31.0``),
    else by name."""
    match = re.search(r"(\d+(?:\.\d+)*\w*)$", release)
    if match:
        try:
            return (1, release[:match.start()].rstrip("v"), Version(match.group(1)), release)
        except InvalidVersion:
            pass
    return (0, release, Version("0"), release)


def profile_path(directory: Path, release: str, what: str = "release") -> Path:
    """The file of the profile named ``release``: a name, never a path (``root.name_in``)."""
    return name_in(directory, release, ".yaml", what)


def load_profile(directory: Path, release: str) -> Profile:
    path = profile_path(directory, release)
    if not path.is_file():
        known = ", ".join(known_releases(directory)) or "none"
        raise PatchspecError(f"unknown release {release!r}; known releases: {known}", file=str(directory))
    return load_profile_text(read_profile(path), str(path))


def read_profile(path: Path) -> str:
    """A profile's text, read as a spec is: a regular file of bounded size (a FIFO named ``*.yaml`` would
    block the read), UTF-8."""
    return spec_text(yamlloc.read(path, "release profile"), str(path), "release profile")


@functools.lru_cache(maxsize=1024)
def load_profile_text(text: str, file: str) -> Profile:
    """The profile in ``text``; read once per text (``--release auto`` and the state record meet each
    profile again), and the result is shared: read it, never change it."""
    data = yamlloc.load(text, file)
    if not isinstance(data, dict):
        raise PatchspecError("a release profile is a YAML mapping", file=file, line=1, col=1)
    schema_errors(data, file, "profile")
    if data.get("format", FORMAT) > FORMAT:
        line, col = yamlloc.locate(data, ["format"])
        raise PatchspecError(f"profile format {data['format']} is newer than this patchspec reads ({FORMAT}); "
                             "upgrade patchspec", file=file, line=line, col=col)
    packages = {}
    for name, pin in data["packages"].items():
        specifier = pin if isinstance(pin, str) else pin.get("versions", "")
        distributions = () if isinstance(pin, str) else tuple(canonicalize_name(d)
                                                              for d in pin.get("distributions", ()))
        try:
            ref = None if isinstance(pin, str) else pin.get("ref")
            packages[name] = Pin(SpecifierSet(specifier), distributions, ref)
        except InvalidSpecifier:
            line, col = yamlloc.locate(data, ["packages", name])
            raise PatchspecError(f"packages/{name}: {specifier!r} is not a version specifier", file=file,
                                 line=line, col=col) from None
    return Profile(data["release"], packages, data.get("specs"), file, text)


INDEX_FILE = "profile-pins.json"   # in the cache directory: the pins of every profile text read before
INDEX_VERSION = 1
INDEX_SIZE = 4096


def all_pins(directory: Path) -> dict[str, Pins]:
    """The pins of every profile beside a spec, by release. A profile text read before (by any verb, in
    any process) is looked up by its hash in an index in the cache directory, so that ``--release auto``
    costs one file read per profile, not a YAML parse and a schema check; a text not in the index is
    loaded in full (and refused as ``load_profile`` refuses it), then indexed."""
    index = _read_index()
    entries = index["entries"]
    out: dict[str, Pins] = {}
    added = False
    for release in known_releases(directory):
        path = profile_path(directory, release)
        text = read_profile(path)
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if key in entries:
            out[release] = Pins.from_json(entries[key])
            continue
        out[release] = load_profile_text(text, str(path)).pins
        entries[key] = out[release].to_json()
        added = True
    if added:
        _write_index(index)
    return out


def _index_path() -> Path:
    from patchspec.releases.cache import cache_dir
    return cache_dir() / INDEX_FILE


def _schema_key() -> str:
    from patchspec.spec import schema_text
    return hashlib.sha256(schema_text("profile").encode()).hexdigest()


def _read_index() -> dict:
    """The index, or an empty one when it is missing, unreadable, or was written for another profile
    schema (a text valid under that schema may not be valid under this one)."""
    empty = {"version": INDEX_VERSION, "schema": _schema_key(), "entries": {}}
    try:
        index = json.loads(_index_path().read_text())
    except (OSError, ValueError):
        return empty
    if not isinstance(index, dict) or {k: index.get(k) for k in ("version", "schema")} != \
            {k: empty[k] for k in ("version", "schema")} or not isinstance(index.get("entries"), dict):
        return empty
    return index


def _write_index(index: dict) -> None:
    """Merged with what other processes wrote since it was read, then replaced whole (a reader never
    sees half a file); a lost race loses entries, never correctness. An index that cannot be written is
    no error: the next verb reads the profiles again."""
    entries = {**_read_index()["entries"], **index["entries"]}
    index["entries"] = dict(list(entries.items())[-INDEX_SIZE:])
    path = _index_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=INDEX_FILE, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(index, out)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def supported_releases(directory: Path, spec: Spec) -> list[str]:
    """The releases a spec supports: the profiles beside it that cover it (no hand-kept list)."""
    return [r for r, pins in all_pins(directory).items() if pins.covers(spec.name)]


def matching_releases(directory: Path, found: dict[str, installed.Installed], spec: Spec) -> list[str]:
    """The releases of the spec whose profile's pins admit what is installed under the root."""
    return [r for r, pins in all_pins(directory).items() if pins.covers(spec.name) and pins.matches(found)]


def describe(found: dict[str, installed.Installed], packages) -> str:
    shown = [f"{found[p].distribution or p} {found[p].version}" for p in sorted(packages) if p in found]
    return ", ".join(shown) or "none of its packages"


def select_release(directory: Path, found: dict[str, installed.Installed], spec: Spec, root: str = "ROOT") -> str:
    """``--release auto``: the one profile of the spec whose pins admit the root's packages. Outside every
    profile: refused, naming the nearest profile and the command that drafts one for this root."""
    matched = matching_releases(directory, found, spec)
    if len(matched) == 1:
        return matched[0]
    packages = {t.package for t in spec.targets}
    seen = describe(found, packages)
    if matched:
        raise PatchspecError(f"several release profiles of {spec.name} match the root ({seen}): "
                             f"{', '.join(matched)}", file=str(directory))
    supported = supported_releases(directory, spec)
    if not supported:
        raise PatchspecError(f"{spec.name} has no release profile yet (none in {directory}); draft one for this "
                             f"root: patchspec profile new NAME --root {root} --spec {spec.path}", file=spec.path)
    nearest = nearest_release(directory, supported, found)
    name = _release_name(found, packages, nearest)
    raise PatchspecError(f"no release profile of {spec.name} matches the root ({seen}); the nearest is {nearest}; "
                         f"draft one: patchspec profile new {name} --root {root} --spec {spec.path} --from {nearest}",
                         file=str(directory))


def nearest_release(directory: Path, releases: list[str], found: dict[str, installed.Installed]) -> str:
    """The profile whose pinned versions are closest to the installed ones (by version order)."""
    pins = all_pins(directory)

    def distance(release: str):
        profile = pins[release]
        gaps = []
        for name, pin in profile.packages.items():
            if name not in found:
                continue
            try:
                have = Version(found[name].version).release
                want = min((Version(s.version).release for s in pin.versions), default=have)
            except InvalidVersion:
                continue
            # padded to three parts each; past the shorter one's end the longer one's parts do not count
            gaps.append(tuple(abs(a - b) for a, b in zip(have + (0,) * 3, want + (0,) * 3, strict=False)))
        return (min(gaps) if gaps else (float("inf"),), release)
    return min(releases, key=distance)


def _release_name(found: dict[str, installed.Installed], packages: set[str], nearest: str) -> str:
    """The name of a profile for the root's release, in the form of the spec's own (``v0.30.0`` beside
    ``v0.26.0``; ``pkg-1.1`` beside ``pkg-1.0``, as ``init`` names it)."""
    for package in sorted(packages):
        if package in found:
            version = found[package].version
            return f"v{version}" if re.fullmatch(r"v\d.*", nearest) else \
                f"{found[package].distribution or package}-{version}"
    return "NAME"


def _acknowledged(given, kind: str, what: str, path) -> frozenset[str]:
    """The rules an override's ``acknowledge`` names for this release, added to the spec's own."""
    rules = KINDS[kind].rules
    if not isinstance(given, list) or not all(isinstance(rule, str) and rule in rules for rule in given):
        takes = f"a list of {', '.join(sorted(rules))}" if rules else "nothing: no rule of this kind can be"
        raise PatchspecError(f"{what}: acknowledge takes {takes}, not {given!r}", file=path)
    return frozenset(given)


def for_release(spec: Spec, profile: Profile) -> Spec:
    """The spec as it applies to this release: overrides merged, every override checked like the spec."""
    if not profile.covers(spec.name):
        raise PatchspecError(f"release profile {profile.release} has no section for spec {spec.name}; "
                             f"add one (patchspec profile new {profile.release} --force ...)", file=profile.path)
    overrides = (profile.specs or {}).get(spec.name, {}).get("overrides", {})
    by_id = {t.id: t for t in spec.targets}
    for target_id in overrides:
        if target_id not in by_id:
            raise PatchspecError(f"override for unknown target {target_id!r} of spec {spec.name}",
                                 file=profile.path)
    targets = []
    for target in spec.targets:
        override = overrides.get(target.id, {})
        transforms = list(target.transforms)
        for key, params in override.get("transforms", {}).items():
            index = int(key)
            if index >= len(transforms):
                raise PatchspecError(f"override of {target.id} transform {index}: the target has "
                                     f"{len(transforms)} transforms", file=profile.path)
            old = transforms[index]
            params = dict(params)
            acknowledged = _acknowledged(params.pop(ACKNOWLEDGE, []), old.kind,
                                         f"override of {target.id} transform {index} ({old.kind})", profile.path)
            unknown = set(params) - set(old.params)
            if unknown:
                raise PatchspecError(f"override of {target.id} transform {index} ({old.kind}): unknown "
                                     f"key(s) {', '.join(sorted(unknown))}", file=profile.path)
            new = dataclasses.replace(old, params={**old.params, **params}, acknowledge=old.acknowledge | acknowledged,
                                      loc=Loc(profile.path, old.loc.line, old.loc.col), param_locs={})
            check_transform_syntax(new)
            transforms[index] = new
        targets.append(dataclasses.replace(
            target, file=override.get("file", target.file), function=override.get("function", target.function),
            branch=override.get("branch", target.branch),
            transforms=tuple(transforms)))
    return spec.with_targets(tuple(targets))
