"""Release profiles: what one release looks like to a spec (versions, per-target overrides, fingerprints).

``specs/releases/<release>.yaml`` beside the spec. Overrides replace keys of a target or of one of its
transforms, so the spec stays written for the newest release and older ones say only how they differ.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from patchspec import yamlloc
from patchspec.errors import PatchspecError
from patchspec.model import Loc, Spec
from patchspec.spec import check_transform_syntax, schema_errors


@dataclass(frozen=True)
class Profile:
    release: str
    packages: dict[str, SpecifierSet]
    specs: dict
    path: str
    text: str

    def fingerprints(self, spec: str) -> dict[str, str]:
        return dict(self.specs.get(spec, {}).get("fingerprints", {}))

    def matches(self, versions: dict[str, str]) -> bool:
        """Every package of the profile that is installed has a version inside its specifier."""
        present = {name: v for name, v in versions.items() if name in self.packages}
        if not present:
            return False
        try:
            return all(Version(v) in self.packages[name] for name, v in present.items())
        except InvalidVersion:
            return False


def releases_dir(spec_path: str | Path) -> Path:
    return Path(spec_path).resolve().parent / "releases"


def known_releases(directory: Path) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.yaml"))


def load_profile(directory: Path, release: str) -> Profile:
    path = directory / f"{release}.yaml"
    if not path.is_file():
        known = ", ".join(known_releases(directory)) or "none"
        raise PatchspecError(f"unknown release {release!r}; known releases: {known}", file=str(directory))
    return load_profile_text(path.read_text(), str(path))


def load_profile_text(text: str, file: str) -> Profile:
    data = yamlloc.load(text, file)
    if not isinstance(data, dict):
        raise PatchspecError("a release profile is a YAML mapping", file=file, line=1, col=1)
    schema_errors(data, file, "profile")
    packages = {}
    for name, specifier in data["packages"].items():
        try:
            packages[name] = SpecifierSet(specifier)
        except InvalidSpecifier:
            line, col = yamlloc.locate(data, ["packages", name])
            raise PatchspecError(f"packages/{name}: {specifier!r} is not a version specifier", file=file,
                                 line=line, col=col) from None
    return Profile(data["release"], packages, data.get("specs") or {}, file, text)


def matching_releases(directory: Path, versions: dict[str, str], spec: Spec) -> list[str]:
    """The releases of the spec whose profile's package specifiers admit the root's versions."""
    return [r for r in spec.releases if (directory / f"{r}.yaml").is_file()
            and load_profile(directory, r).matches(versions)]


def select_release(directory: Path, versions: dict[str, str], spec: Spec) -> str:
    """``--release auto``: the one profile of the spec whose package specifiers admit the root's versions."""
    found = matching_releases(directory, versions, spec)
    if len(found) == 1:
        return found[0]
    seen = ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "no versions found"
    if not found:
        raise PatchspecError(f"no release profile matches the root ({seen}); known releases: "
                             f"{', '.join(known_releases(directory)) or 'none'}", file=str(directory))
    raise PatchspecError(f"several release profiles match the root ({seen}): {', '.join(found)}",
                         file=str(directory))


def for_release(spec: Spec, profile: Profile) -> Spec:
    """The spec as it applies to this release: overrides merged, every override checked like the spec."""
    if profile.release not in spec.releases:
        raise PatchspecError(f"spec {spec.name} does not support release {profile.release}; it supports "
                             f"{', '.join(spec.releases)}", file=spec.path)
    overrides = profile.specs.get(spec.name, {}).get("overrides", {})
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
            unknown = set(params) - set(old.params)
            if unknown:
                raise PatchspecError(f"override of {target.id} transform {index} ({old.kind}): unknown "
                                     f"key(s) {', '.join(sorted(unknown))}", file=profile.path)
            new = dataclasses.replace(old, params={**old.params, **params},
                                      loc=Loc(profile.path, old.loc.line, old.loc.col), param_locs={})
            check_transform_syntax(new)
            transforms[index] = new
        targets.append(dataclasses.replace(
            target, file=override.get("file", target.file), function=override.get("function", target.function),
            transforms=tuple(transforms)))
    return spec.with_targets(tuple(targets))
