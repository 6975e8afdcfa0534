#!/usr/bin/env python3
"""Reads hpcrl's TensorBoard event files with Google's protobuf library.

    read_tfevents.py [--allow-truncated] PATH

PATH is an event file, or a directory: its events.out.tfevents.* files are one
run, read in name order (the order TensorBoard reads a run's files in), and each
subdirectory holding such files is a run of its own (named by its path under
PATH). Prints one JSON line per scalar TensorBoard would show: {"run", "tag",
"step", "value"}; value is the float32 the file holds, as an exact double (a
non-finite one as the string "nan", "inf" or "-inf").

Restarts are applied as TensorBoard's event accumulator applies them to files
of version 2: the first SessionLog START of a run is the job starting; a later
START at step S drops every scalar of that run (all tags) with step >= S that
was read before it.

It shares no code with the C++ writer (src/trace/tensorboard.cpp), so it is an
independent check of it: the messages are built at run time from descriptors
with TensorBoard's field numbers (Event, Summary, Summary.Value of
tensorflow/core/util/event.proto and framework/summary.proto, trimmed to the
fields hpcrl writes), and CRC-32C is computed here. It is strict, because it
exists to catch writer bugs: for every record it checks both masked CRCs, that
protobuf parses the data with no unknown fields, and that protobuf re-encodes
the parsed message to exactly the same bytes; each file must start with the
file_version "brain.Event:2" event, then a session_log START, and every later
event must carry scalars (simple_value). A file cut off inside its last record (a crashed run) is an
error unless --allow-truncated, which reads the complete records before it.
Exit status: 0 valid, 1 invalid (message on stderr), 2 usage.

Needs python3-protobuf (Debian) or the protobuf package from PyPI.
"""

import argparse
import json
import math
import os
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

FDP = descriptor_pb2.FieldDescriptorProto


def _crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _field(msg, name, number, ftype, label=FDP.LABEL_OPTIONAL, type_name=None, oneof=None):
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof


def event_class():
    """tensorflow.Event with the fields hpcrl writes, numbered as TensorFlow numbers them."""
    fdp = descriptor_pb2.FileDescriptorProto(name="hpcrl_tfevents.proto", package="tensorflow", syntax="proto3")
    summary = fdp.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    _field(value, "tag", 1, FDP.TYPE_STRING)
    _field(value, "simple_value", 2, FDP.TYPE_FLOAT, oneof=0)
    _field(summary, "value", 1, FDP.TYPE_MESSAGE, FDP.LABEL_REPEATED, ".tensorflow.Summary.Value")
    session_log = fdp.message_type.add(name="SessionLog")
    status = session_log.enum_type.add(name="SessionStatus")
    for name, number in (("STATUS_UNSPECIFIED", 0), ("START", 1), ("STOP", 2), ("CHECKPOINT", 3)):
        status.value.add(name=name, number=number)
    _field(session_log, "status", 1, FDP.TYPE_ENUM, type_name=".tensorflow.SessionLog.SessionStatus")
    event = fdp.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    _field(event, "wall_time", 1, FDP.TYPE_DOUBLE)
    _field(event, "step", 2, FDP.TYPE_INT64)
    _field(event, "file_version", 3, FDP.TYPE_STRING, oneof=0)
    _field(event, "summary", 5, FDP.TYPE_MESSAGE, type_name=".tensorflow.Summary", oneof=0)
    _field(event, "session_log", 6, FDP.TYPE_MESSAGE, type_name=".tensorflow.SessionLog", oneof=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("tensorflow.Event")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)  # Debian 12: 4.21


class Invalid(Exception):
    pass


def one_line(msg):
    return "{" + text_format.MessageToString(msg, as_one_line=True) + "}"


def records(blob, allow_truncated):
    """(offset, data) of every TFRecord in blob, both CRCs checked."""
    at = 0
    while at < len(blob):
        if len(blob) - at < 12:
            if allow_truncated:
                return
            raise Invalid(f"byte {at}: file ends inside a record header")
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        if length_crc != masked_crc32c(header):
            raise Invalid(f"byte {at}: length CRC {length_crc:#010x} != {masked_crc32c(header):#010x}")
        if len(blob) - at - 12 < length + 4:
            if allow_truncated:
                return
            raise Invalid(f"byte {at}: file ends inside a record of {length} bytes")
        data = blob[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        if data_crc != masked_crc32c(data):
            raise Invalid(f"byte {at}: data CRC {data_crc:#010x} != {masked_crc32c(data):#010x}")
        yield at, data
        at += 16 + length


def has_unknown_fields(msg):
    try:
        if len(msg.UnknownFields()):
            return True
    except (AttributeError, NotImplementedError):  # re-encoding below still catches most
        pass
    for field, value in msg.ListFields():
        if field.type != FDP.TYPE_MESSAGE:
            continue
        children = value if field.label == FDP.LABEL_REPEATED else [value]
        if any(has_unknown_fields(child) for child in children):
            return True
    return False


def as_json_number(value):
    # Some protobuf backends hand back the shortest decimal that rounds to the
    # float32; rounding through float32 again gives its exact value either way.
    value = struct.unpack("<f", struct.pack("<f", value))[0] if math.isfinite(value) else value
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


START = 1  # SessionLog.SessionStatus.START


def events_of(path, event_cls, allow_truncated):
    """The file's scalars and session starts, in order: ("scalar", {tag, step, value}) or ("start", step)."""
    with open(path, "rb") as f:
        blob = f.read()
    out = []
    for index, (at, data) in enumerate(records(blob, allow_truncated)):
        where = f"record {index} at byte {at}"
        event = event_cls()
        try:
            event.ParseFromString(data)
        except Exception as e:  # DecodeError, or invalid UTF-8 in a string
            raise Invalid(f"{where}: not a tensorflow.Event: {e}")
        if has_unknown_fields(event):
            raise Invalid(f"{where}: fields TensorBoard's Event does not have: {data.hex()}")
        if event.SerializeToString(deterministic=True) != data:
            raise Invalid(f"{where}: protobuf re-encodes it differently (field order, a default written, "
                          f"or a non-minimal varint): {data.hex()}")
        if not (math.isfinite(event.wall_time) and event.wall_time > 0):
            raise Invalid(f"{where}: wall_time {event.wall_time} is not a Unix time")
        what = event.WhichOneof("what")
        if index == 0:
            if what != "file_version" or event.file_version != "brain.Event:2":
                raise Invalid(f"{where}: the first event must be file_version \"brain.Event:2\", not {one_line(event)}")
            continue
        if index == 1:
            if what != "session_log" or event.session_log.status != START:
                raise Invalid(f"{where}: the second event must be a session_log START, not {one_line(event)}")
            out.append(("start", event.step))
            continue
        if what != "summary" or not event.summary.value:
            raise Invalid(f"{where}: expected a summary event, got {one_line(event)}")
        for value in event.summary.value:
            if value.WhichOneof("value") != "simple_value":
                raise Invalid(f"{where}: value {value.tag!r} is not a simple_value scalar")
            out.append(("scalar", {"tag": value.tag, "step": event.step, "value": as_json_number(value.simple_value)}))
    if not blob:
        raise Invalid("empty file (no file_version event)")
    return out


def run_scalars(files, event_cls, allow_truncated):
    """The scalars TensorBoard shows for one run (its files in name order), restarts applied."""
    shown, seen_start = [], False
    for path in files:
        try:
            for kind, item in events_of(path, event_cls, allow_truncated):
                if kind == "scalar":
                    shown.append(item)
                elif seen_start:  # a restart at step `item`: later steps of every tag are stale
                    shown = [s for s in shown if s["step"] < item]
                else:
                    seen_start = True
        except Invalid as e:
            raise Invalid(f"{path}: {e}")
    return shown


def is_event_file(name):
    return name.startswith("events.out.tfevents.")


def runs(path):
    """{run name: its event files in name order}: PATH's own files are run "", each subdirectory with files a run."""
    if not os.path.isdir(path):
        return {"": [path]}
    out = {}
    for root, dirs, names in os.walk(path):
        dirs.sort()
        files = sorted(n for n in names if is_event_file(n))
        if files:
            run = os.path.relpath(root, path)
            out["" if run == "." else run] = [os.path.join(root, n) for n in files]
    if not out:
        raise Invalid(f"{path}: no events.out.tfevents.* file in the directory or below it")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", help="an event file, or a directory of them")
    parser.add_argument("--allow-truncated", action="store_true",
                        help="stop quietly at a record cut off at the end of a file")
    args = parser.parse_args()
    assert crc32c(b"123456789") == 0xE3069283, "CRC-32C self-check"
    event_cls = event_class()
    try:
        for run, files in sorted(runs(args.path).items()):
            for scalar in run_scalars(files, event_cls, args.allow_truncated):
                print(json.dumps({"run": run, **scalar}, ensure_ascii=False))
    except (Invalid, OSError) as e:
        print(f"read_tfevents: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
