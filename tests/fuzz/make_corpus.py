#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/.

Valid and near-valid messages of every wire format the targets decode, built
with struct.pack from the layouts in the headers (little-endian, as the x86-64
hosts Chorus runs on):
  transports/tcp/wire.hpp       FrameHeader (56 B) + payload (StatusPayload 40 B), Hello (88 B)
  transports/transport.hpp      failure notice: u32 n, n x (u32 space, u64 finished), message
  base/bootstrap/store_wire.hpp store frame header (32 B) + key + value, key lists
  transports/ucx/ucx_wire.hpp   LeadHeader (56 B), ControlHeader (80 B) + reason
Seed files are named <what>.bin; files named by a SHA-1 were added by
libFuzzer's -merge=1 (README.md: suite fuzz). Re-running this script rewrites the
seeds and leaves those alone.

  python3 tests/fuzz/make_corpus.py [CORPUS_DIR]
"""
import os
import struct
import sys

# --- shared ---------------------------------------------------------------

SIG = struct.Struct("<QQqBBBBI")  # CallSignature, 32 bytes


def sig(seq=7, count=1000, root=-1, kind=1, dtype=8, op=1, algo=2, layout=0):
    return SIG.pack(seq, count, root, kind, dtype, op, algo, layout)


def notice(message=b"rank 2 aborted: out of memory", spared=()):
    out = struct.pack("<I", len(spared))
    for space, finished in spared:
        out += struct.pack("<IQ", space, finished)
    return out + message


# --- TCP transport ----------------------------------------------------------

FRAME_MAGIC = 0x53524843  # "CHRS"
HELLO_MAGIC = 0x48524843  # "CHRH"
DATA, GOODBYE, ABORT, ANNOUNCE, STATUS, ASK, ANSWER = 1, 2, 3, 4, 5, 6, 7
MAX_FRAME = 1 << 40
MAX_ABORT_REASON = 4096


def frame(ftype, length, payload=b"", tag=0x100001, magic=FRAME_MAGIC, version=1, flags=0,
          reserved=0, signature=None):
    hdr = struct.pack("<IHBBIIQ", magic, version, ftype, flags, tag, reserved, length)
    return hdr + (signature if signature is not None else sig()) + payload


def abort_frame(body, code=10, length=None):
    return frame(ABORT, len(body) if length is None else length, body, tag=code,
                 signature=sig(seq=0, count=0, kind=0, dtype=0, op=0, algo=0))


def tcp_frame_seeds():
    s = {}
    s["data-empty"] = frame(DATA, 0)
    s["data-16"] = frame(DATA, 16, bytes(range(16)))
    s["data-at-limit"] = frame(DATA, MAX_FRAME)
    s["data-over-limit"] = frame(DATA, MAX_FRAME + 1)
    s["goodbye"] = frame(GOODBYE, 0, signature=bytes(32))
    s["goodbye-with-length"] = frame(GOODBYE, 1, b"x")
    s["announce"] = frame(ANNOUNCE, 0)
    s["announce-with-length"] = frame(ANNOUNCE, 8, bytes(8))
    status = sig(seq=6) + struct.pack("<iI", 3, 0)  # StatusPayload: finished, waiting_on
    s["status"] = frame(STATUS, len(status), status)
    s["status-short"] = frame(STATUS, 32, sig(seq=6))
    s["ask"] = frame(ASK, 0, signature=sig(seq=9))
    s["ask-with-length"] = frame(ASK, 4, bytes(4))
    s["answer-finished"] = frame(ANSWER, 16, bytes(range(16)), flags=1, signature=sig(seq=9))
    s["answer-not-finished"] = frame(ANSWER, 0, signature=sig(seq=9))
    s["answer-not-finished-with-result"] = frame(ANSWER, 16, bytes(16))
    s["answer-over-limit"] = frame(ANSWER, (1 << 20) + 1, flags=1)
    s["abort-plain"] = abort_frame(notice())
    s["abort-spared"] = abort_frame(notice(b"rank 1: timeout", [(1, 41), (2, 7)]))
    s["abort-empty-message"] = abort_frame(notice(b"", [(0, 1)]))
    s["abort-bare-count"] = abort_frame(notice(b""))
    s["abort-count-too-big"] = abort_frame(struct.pack("<I", 3) + struct.pack("<IQ", 1, 2))
    s["abort-short"] = abort_frame(b"\x01\x00")
    s["abort-max"] = abort_frame(notice(b"m" * (MAX_ABORT_REASON - 16), [(5, 9)]))
    s["abort-over-limit"] = abort_frame(b"", length=MAX_ABORT_REASON + 1)
    s["abort-payload-missing"] = abort_frame(b"", length=100)
    s["bad-magic"] = frame(DATA, 0, magic=0x53524844)
    s["bad-version"] = frame(DATA, 0, version=2)
    s["unknown-type"] = frame(6, 0)
    s["truncated"] = frame(DATA, 0)[:55]
    return s


def hello(token=b"fuzz-job-token", frm=2, to=1, world=4, magic=HELLO_MAGIC, version=1):
    return struct.pack("<IHHiiiI64s", magic, version, 0, frm, to, world, 0, token)


def hello_input(h, world=4, rank=1, token=b"fuzz-job-token"):
    return h + struct.pack("<ii", world, rank) + token


def tcp_hello_seeds():
    tok64 = b"".join(b"t%02d" % i for i in range(22))[:64]
    long_token = b"".join(b"L%03d" % i for i in range(25))  # 100 bytes: only 64 count
    s = {}
    s["valid"] = hello_input(hello())
    s["valid-default-params"] = hello()  # 88 bytes: world 4, rank 1, fuzz-job-token
    s["valid-rank0-world1"] = hello_input(hello(frm=0, to=0, world=1), world=1, rank=0)
    s["token-64"] = hello_input(hello(token=tok64), token=tok64)
    s["token-long"] = hello_input(hello(token=long_token[:64]), token=long_token)
    s["token-empty"] = hello_input(hello(token=b""), token=b"")
    s["wrong-token"] = hello_input(hello(token=b"fuzz-job-tokeN"))
    s["token-prefix"] = hello_input(hello(token=b"fuzz-job"))
    s["from-out-of-range"] = hello_input(hello(frm=4))
    s["from-negative"] = hello_input(hello(frm=-1))
    s["wrong-world"] = hello_input(hello(world=8))
    s["wrong-target"] = hello_input(hello(to=3))
    s["bad-magic"] = hello_input(hello(magic=FRAME_MAGIC))
    s["bad-version"] = hello_input(hello(version=0))
    s["truncated"] = hello()[:87]
    return s


# --- TCP store --------------------------------------------------------------

STORE_MAGIC = 0x54534843  # "CHST"
AUTH, SET, GET, WAIT, ADD = 1, 2, 3, 4, 5
OK, TIMEOUT, ERROR = 100, 101, 102
MAX_KEY = 64 << 10
MAX_VALUE = 64 << 20
SERVER_TOKEN = b"chorus-fuzz-token"  # fuzz_store_server.cpp kToken


def store(op, rid, key=b"", value=b"", arg=0, key_len=None, value_len=None, magic=STORE_MAGIC,
          version=1, reserved=0):
    kl = len(key) if key_len is None else key_len
    vl = len(value) if value_len is None else value_len
    return struct.pack("<IHHIIIqI", magic, version, op, rid, kl, vl, arg, reserved) + key + value


def key_list(keys):
    return struct.pack("<I", len(keys)) + b"".join(struct.pack("<I", len(k)) + k for k in keys)


def store_wire_seeds():
    s = {}
    s["auth"] = store(AUTH, 1, value=SERVER_TOKEN)
    s["set"] = store(SET, 2, b"rank/0/addr", b"10.0.0.1:4242")
    s["get"] = store(GET, 3, b"rank/0/addr", arg=30000)
    s["wait"] = store(WAIT, 4, value=key_list([b"a", b"rank/1/addr"]), arg=1000)
    s["add"] = store(ADD, 5, b"counter", arg=-3)
    s["reply-ok"] = store(OK, 3, value=b"10.0.0.1:4242")
    s["reply-ok-add"] = store(OK, 5, arg=42)
    s["reply-timeout"] = store(TIMEOUT, 4, value=key_list([b"rank/1/addr"]))
    s["reply-error"] = store(ERROR, 1, value=b"wrong job token")
    s["key-at-limit"] = store(SET, 6, key_len=MAX_KEY, value_len=MAX_VALUE)
    s["key-over-limit"] = store(SET, 6, key_len=MAX_KEY + 1)
    s["value-over-limit"] = store(SET, 6, value_len=MAX_VALUE + 1)
    s["reserved-set"] = store(GET, 7, b"k", reserved=1)
    s["unknown-op"] = store(6, 8)
    s["bad-magic"] = store(GET, 9, b"k", magic=0x54534844)
    s["bad-version"] = store(GET, 9, b"k", version=2)
    s["keys-empty"] = key_list([])
    s["keys-one"] = key_list([b"rank/3/ready"])
    s["keys-three"] = key_list([b"a", b"", b"ccc"])
    s["keys-trailing"] = key_list([b"a"]) + b"x"
    s["keys-count-too-big"] = struct.pack("<II", 1000, 1) + b"a"
    s["keys-len-too-big"] = struct.pack("<II", 1, 50) + b"abc"
    s["keys-short"] = b"\x01\x00"
    return s


def store_server_seeds():
    a = store(AUTH, 1, value=SERVER_TOKEN)
    s = {}
    s["session"] = (a + store(SET, 2, b"x", b"1") + store(GET, 3, b"x") +
                    store(WAIT, 4, value=key_list([b"x"])) + store(ADD, 5, b"x", arg=2))
    s["waits-answered-by-set"] = (a + store(GET, 2, b"k", arg=1000) +
                                  store(WAIT, 3, value=key_list([b"k", b"j"]), arg=1000) +
                                  store(SET, 4, b"k", b"v") + store(ADD, 5, b"j", arg=1))
    s["waits-time-out"] = (a + store(GET, 2, b"missing", arg=0) +
                           store(WAIT, 3, value=key_list([b"m1", b"m2"]), arg=-5))
    s["add-not-integer"] = a + store(SET, 2, b"n", b"abc") + store(ADD, 3, b"n", arg=1)
    s["add-overflow"] = a + store(ADD, 2, b"n", arg=(1 << 63) - 1) + store(ADD, 3, b"n", arg=1)
    s["wrong-token"] = store(AUTH, 1, value=b"not-the-token") + store(SET, 2, b"k", b"v")
    s["no-auth"] = store(SET, 1, b"k", b"v")
    s["auth-with-key"] = store(AUTH, 1, b"k", SERVER_TOKEN)
    s["auth-twice"] = a + store(AUTH, 2, value=SERVER_TOKEN)
    s["auth-token-too-long"] = store(AUTH, 1, value_len=4097)
    s["reply-from-client"] = a + store(OK, 2)
    s["wait-malformed"] = a + store(WAIT, 2, value=key_list([b"k"]) + b"junk")
    s["bad-header"] = a + store(GET, 2, b"k", reserved=3)
    s["partial-frame"] = a + store(SET, 2, b"key", b"value")[:40]
    s["duplicate-ids"] = a + store(GET, 7, b"d", arg=5) + store(SET, 7, b"d", b"1") * 2
    return s


# --- UCX transport ----------------------------------------------------------

LEAD_MAGIC = 0x4C584843  # "CHXL"
CONTROL_MAGIC = 0x43584843  # "CHXC"
FLAG_BULK = 1
MAX_REASON = 4096
MAX_MESSAGE = 1 << 40
UCX_TOKEN = b"fuzz-job-token"  # fuzz_ucx_wire.cpp kToken


def job_hash(token):  # FNV-1a, transports/ucx/ucx_wire.cpp
    h = 0xCBF29CE484222325
    for c in token:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


JOB = job_hash(UCX_TOKEN)


def lead(length, data=b"", flags=0, job=JOB, magic=LEAD_MAGIC, version=1):
    return struct.pack("<IHHQQ", magic, version, flags, job, length) + sig() + data


def control(ctype, reason=b"", code=0, length=None, job=JOB, magic=CONTROL_MAGIC, version=1,
            pid=4242, start=123456, boot=b"6c0e1a4e-0f1b-4d55-9d11-2f7c4b6f2a10"):
    n = len(reason) if length is None else length
    return struct.pack("<IHHQiIqQ40s", magic, version, ctype, job, code, n, pid, start,
                       boot) + reason


def ucx_wire_seeds():
    s = {}
    s["lead-small"] = lead(12, b"hello world!")
    s["lead-empty"] = lead(0)
    s["lead-bulk"] = lead(1 << 20, flags=FLAG_BULK)
    s["lead-bulk-at-limit"] = lead(MAX_MESSAGE, flags=FLAG_BULK)
    s["lead-bulk-over-limit"] = lead(MAX_MESSAGE + 1, flags=FLAG_BULK)
    s["lead-bulk-zero"] = lead(0, flags=FLAG_BULK)
    s["lead-bulk-with-data"] = lead(4, b"abcd", flags=FLAG_BULK)
    s["lead-length-mismatch"] = lead(10, b"abc")
    s["lead-unknown-flags"] = lead(0, flags=2)
    s["lead-other-job"] = lead(0, job=job_hash(b"another-job"))
    s["lead-bad-magic"] = lead(0, magic=CONTROL_MAGIC)
    s["lead-truncated"] = lead(0)[:40]
    s["control-hello"] = control(1)
    s["control-goodbye"] = control(2, pid=0, start=0, boot=b"")
    s["control-abort"] = control(3, notice(b"rank 0: peer failure", [(1, 3)]), code=7)
    s["control-abort-plain"] = control(3, notice(), code=9)
    s["control-abort-max"] = control(3, notice(b"r" * (MAX_REASON - 4)), code=9)
    s["control-abort-malformed"] = control(3, struct.pack("<I", 9) + b"xy", code=9)
    s["control-reason-over-limit"] = control(3, length=MAX_REASON + 1)
    s["control-length-mismatch"] = control(3, b"abc", length=2)
    s["control-unknown-type"] = control(4)
    s["control-other-job"] = control(1, job=job_hash(b"another-job"))
    s["control-bad-version"] = control(1, version=3)
    s["control-truncated"] = control(1)[:79]
    return s


TARGETS = {
    "fuzz_tcp_frame": tcp_frame_seeds,
    "fuzz_tcp_hello": tcp_hello_seeds,
    "fuzz_store_wire": store_wire_seeds,
    "fuzz_store_server": store_server_seeds,
    "fuzz_ucx_wire": ucx_wire_seeds,
}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "corpus")
    total = 0
    for target, seeds in TARGETS.items():
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds().items():
            with open(os.path.join(d, name + ".bin"), "wb") as f:
                f.write(data)
            total += 1
    print(f"make_corpus: {total} seeds in {root}")


if __name__ == "__main__":
    main()
