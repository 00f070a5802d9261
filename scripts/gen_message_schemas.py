"""Writes rust/src/internal_topics/schemas.rs: the wire layout (field names, types, versions,
tags, defaults) of the records of Kafka's internal topics, taken from the message definitions
packaged in the Kafka jars the referee fetches (`~/.cache/kafkalog/kafka/<version>/libs`).

Run it again when a new Kafka release adds record versions:
    .venv/bin/python scripts/gen_message_schemas.py
The newest release that defines a message wins (versions only ever grow); 3.9.2 adds what
later releases dropped.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "kafkalog" / "kafka"
RELEASES = ["4.4.0", "3.9.2"]  # newest first
JARS = ["kafka-group-coordinator", "kafka-transaction-coordinator", "kafka-share-coordinator", "kafka-metadata",
        "kafka-clients"]
# The coordinator records, the metadata records and the consumer protocol's embedded messages.
WANTED_CLIENT_MESSAGES = {"ConsumerProtocolSubscription", "ConsumerProtocolAssignment"}


def load_specs() -> dict:
    specs: dict = {}
    for release in RELEASES:
        libs = CACHE / release / "libs"
        if not libs.is_dir():
            sys.exit(f"{libs}: run scripts/setup.sh first (it fetches the Kafka jars)")
        for jar in sorted(libs.glob("*.jar")):
            if not any(jar.name.startswith(j + "-") for j in JARS):
                continue
            with zipfile.ZipFile(jar) as z:
                for name in z.namelist():
                    if not (name.startswith("common/") and name.endswith(".json")):
                        continue
                    text = "\n".join(l for l in z.read(name).decode().splitlines()
                                     if not l.strip().startswith("//"))
                    spec = json.loads(text)
                    kind = spec.get("type")
                    if kind not in ("coordinator-key", "coordinator-value", "metadata", "data"):
                        continue
                    if kind == "data" and spec["name"] not in WANTED_CLIENT_MESSAGES:
                        continue
                    if "share-coordinator" in jar.name:
                        family = "share"
                    elif "transaction" in jar.name or "group" in jar.name:
                        family = "txn" if "transaction" in jar.name else "group"
                    elif kind == "metadata":
                        family = "metadata"
                    else:
                        family = "consumer_protocol"
                    specs.setdefault((family, spec["name"]), spec)
    return specs


def versions(text: str | None) -> str:
    if text is None or text == "none":
        return "NONE"
    m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text.strip())
    if not m:
        raise ValueError(text)
    lo = int(m.group(1))
    if m.group(2) == "+":
        return f"V({lo}, i16::MAX)"
    hi = int(m.group(3)) if m.group(3) else lo
    return f"V({lo}, {hi})"


class Gen:
    def __init__(self):
        self.out: list[str] = []
        self.n = 0

    def struct(self, prefix: str, fields: list, common: dict) -> str:
        """Emits a static field array; returns its name."""
        items = []
        for f in fields:
            items.append(self.field(prefix, f, common))
        name = f"{prefix}_F{self.n}".upper()
        self.n += 1
        self.out.append(f"static {name}: &[FieldSpec] = &[\n" + "".join(items) + "];\n")
        return name

    def ftype(self, prefix: str, t: str, f: dict, common: dict) -> str:
        scalars = {"bool": "Bool", "int8": "Int8", "int16": "Int16", "uint16": "Uint16",
                   "int32": "Int32", "uint32": "Uint32", "int64": "Int64", "float64": "Float64",
                   "string": "String", "bytes": "Bytes", "uuid": "Uuid", "records": "Records"}
        if t.startswith("[]"):
            inner = self.ftype(prefix, t[2:], f, common)
            return f"T::Array(&{inner})"
        if t in scalars:
            return f"T::{scalars[t]}"
        sub = f.get("fields")
        if sub is None:
            sub = common[t]
        return f"T::Struct({self.struct(prefix, sub, common)})"

    def field(self, prefix: str, f: dict, common: dict) -> str:
        ty = self.ftype(prefix, f["type"], f, common)
        tag = f.get("tag")
        tagged = versions(f.get("taggedVersions")) if tag is not None else "NONE"
        if "default" not in f:
            default = "None"
        else:
            d = f["default"]
            d = "null" if d is None else str(d).lower() if isinstance(d, bool) else str(d)
            default = f"Some({json.dumps(d)})"
        # A tagged field's versions default to its tagged versions; Kafka's JSON names are camelCase.
        field_versions = f.get("versions", f.get("taggedVersions"))
        name = f["name"][0].lower() + f["name"][1:]
        return (f"    FieldSpec {{ name: {json.dumps(name)}, ty: {ty}, versions: {versions(field_versions)}, "
                f"nullable: {versions(f.get('nullableVersions'))}, tag: {tag if tag is not None else -1}, "
                f"tagged: {tagged}, default: {default} }},\n")


def main() -> None:
    specs = load_specs()
    g = Gen()
    messages = []
    for (family, name), spec in sorted(specs.items()):
        common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
        fields = g.struct(re.sub(r"(?<!^)(?=[A-Z])", "_", name), spec["fields"], common)
        messages.append(
            f"    MessageSpec {{ family: Family::{family.title().replace('_', '')}, name: {json.dumps(name)}, "
            f"api_key: {spec.get('apiKey', -1)}, kind: Kind::{spec['type'].title().replace('-', '')}, "
            f"valid: {versions(spec['validVersions'])}, flexible: {versions(spec.get('flexibleVersions'))}, "
            f"fields: {fields} }},\n")
    header = (
        "//! Generated by `scripts/gen_message_schemas.py` from the message definitions packaged in\n"
        f"//! Kafka {', '.join(RELEASES)}'s jars: the wire layout of the internal topics' records.\n"
        "//! Do not edit; run the script again.\n\n"
        "#![allow(clippy::all)]\n\n"
        "use super::message::{Family, FieldSpec, FieldType as T, Kind, MessageSpec, Versions as V};\n\n"
        "const NONE: V = V::NONE;\n\n")
    body = "".join(g.out) + "pub static MESSAGES: &[MessageSpec] = &[\n" + "".join(messages) + "];\n"
    path = ROOT / "rust" / "src" / "internal_topics" / "schemas.rs"
    path.write_text(header + body)
    print(f"{path}: {len(messages)} messages")


if __name__ == "__main__":
    main()
