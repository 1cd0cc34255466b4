#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (corpus/<target>/<name>) in the input layouts
the targets read (src/lib.rs, fuzz_targets/*.rs). Run from anywhere; it rewrites the seeds.
Files named finding-* are not written here: each is an input that found a bug, committed as the
fuzzer found it (its unit test names it), so that every run starts from it. Files named by a
sha1 are inputs of `ci/fuzz.sh long` runs that added coverage, merged in with libFuzzer's
`-merge=1`."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
NEXT, WRITE, INDIRECT = 1, 2, 4


def desc(addr, length, flags, nxt):
    """One descriptor of pop_chain's layout (short forms when they fit)."""
    sel, b = 0, b""
    if addr % 4 == 0 and addr >> 2 < 0x10000:
        b += struct.pack("<H", addr >> 2)
    else:
        sel |= 0x80
        b += struct.pack("<Q", addr)
    if length < 0x10000:
        b += struct.pack("<H", length)
    else:
        sel |= 0x40
        b += struct.pack("<I", length)
    return bytes([sel]) + b + bytes([flags & 7, nxt & 0xFF])


def ring(descs, data, head=0):
    """pop_chain's input: head, 16 descriptors (the rest zero), then the data at 0x1000."""
    body = b"".join(desc(*d) for d in descs)
    body += desc(0, 0, 0, 0) * (16 - len(descs))
    return bytes([head]) + body + data[:0x1000]


def chain3(d1, d2, data):
    """header at 0x1000 (len 16), then d1 (addr, len, flags), then d2."""
    return ring([(0x1000, 16, NEXT, 1), (d1[0], d1[1], d1[2] | NEXT, 2), (d2[0], d2[1], d2[2], 0)], data)


def blk():
    hdr = lambda t, sector: struct.pack("<IIQ", t, 0, sector)
    seeds = {
        "read": chain3((0x2000, 512, WRITE), (0x3000, 1, WRITE), hdr(0, 8)),
        "write": chain3((0x2000, 1024, 0), (0x3000, 1, WRITE), hdr(1, 16)),
        "flush": ring([(0x1000, 16, NEXT, 1), (0x3000, 1, WRITE, 0)], hdr(4, 0)),
        "get_id": chain3((0x2000, 20, WRITE), (0x3000, 1, WRITE), hdr(8, 0)),
        "discard": chain3((0x1010, 16, 0), (0x3000, 1, WRITE), hdr(11, 0) + struct.pack("<QII", 8, 8, 0)),
        "write_zeroes": chain3((0x1010, 32, 0), (0x3000, 1, WRITE),
                               hdr(13, 0) + struct.pack("<QII", 0, 16, 1) + struct.pack("<QII", 64, 8, 0)),
        "read_second_region": chain3((0x20800, 4096, WRITE), (0x21800, 1, WRITE), hdr(0, 0)),
        "indirect": ring([(0x1100, 48, INDIRECT, 0)],
                         hdr(0, 1) + b"\0" * (0x100 - 16)
                         + struct.pack("<QIHH", 0x1000, 16, NEXT, 1)
                         + struct.pack("<QIHH", 0x2000, 512, NEXT | WRITE, 2)
                         + struct.pack("<QIHH", 0x3000, 1, WRITE, 0)),
    }
    return seeds


def lun(target, l):
    return bytes([1, target, 0x40 | (l >> 8), l & 0xFF, 0, 0, 0, 0])


def scsi_request():
    def cmd(cdb, target=0, l=0, data_in=512, data_out=0):
        req = lun(target, l) + struct.pack("<Q", 7) + bytes([0, 0, 0]) + cdb.ljust(32, b"\0")
        descs = [(0x1000, 51, NEXT, 1)]
        if data_out:
            descs.append((0x2000, data_out, NEXT, 2))
        descs.append((0x3000, 108, WRITE | (NEXT if data_in else 0), len(descs) + 1))
        if data_in:
            descs.append((0x4000, data_in, WRITE, 0))
        return bytes([2, 0, 0, 0]) + ring(descs, req)
    seeds = {
        "inquiry": cmd(bytes([0x12, 0, 0, 0, 96, 0]), data_in=96),
        "read10": cmd(bytes([0x28, 0, 0, 0, 0, 1, 0, 0, 1, 0])),
        "write10": cmd(bytes([0x2A, 0, 0, 0, 0, 2, 0, 0, 1, 0]), data_in=0, data_out=512),
        "read16": cmd(bytes([0x88, 0]) + struct.pack(">QI", 3, 1) + b"\0\0"),
        "tur": cmd(bytes(6), data_in=0),
        "report_luns": cmd(bytes([0xA0, 0, 0, 0, 0, 0]) + struct.pack(">I", 256) + b"\0\0", data_in=256),
        "read_capacity16": cmd(bytes([0x9E, 0x10]) + bytes(8) + struct.pack(">I", 32) + b"\0\0", data_in=32),
        "mode_sense6": cmd(bytes([0x1A, 0, 0x3F, 0, 192, 0]), data_in=192),
        "absent_target": cmd(bytes([0x12, 0, 0, 0, 96, 0]), target=1, data_in=96),
        "absent_lun": cmd(bytes([0x12, 0, 0, 0, 96, 0]), l=9, data_in=96),
        "cdb16_sense32": bytes([2, 3, 16, 32]) + ring(
            [(0x1000, 35, NEXT, 1), (0x3000, 44, WRITE | NEXT, 2), (0x4000, 512, WRITE, 0)],
            lun(0, 0) + struct.pack("<Q", 1) + bytes(3) + bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0]).ljust(16, b"\0")),
    }
    tmf = lambda sub, t=0: struct.pack("<II", 0, sub) + lun(t, 0) + struct.pack("<Q", 9)
    seeds["tmf_lun_reset"] = bytes([0, 0, 0, 0]) + ring([(0x1000, 24, NEXT, 1), (0x3000, 1, WRITE, 0)], tmf(5))
    seeds["tmf_abort_absent"] = bytes([0, 0, 0, 0]) + ring([(0x1000, 24, NEXT, 1), (0x3000, 1, WRITE, 0)], tmf(0, 2))
    an = struct.pack("<I", 2) + lun(0, 0) + struct.pack("<I", 0xFF)
    seeds["an_subscribe"] = bytes([0, 0, 0, 0]) + ring([(0x1000, 16, NEXT, 1), (0x3000, 5, WRITE, 0)], an)
    seeds["event_queue"] = bytes([1, 0, 0, 0]) + ring([(0x3000, 16, WRITE, 0)], b"")
    return seeds


def scsi_cdb():
    def run(cdb, out=(), inb=(), payload=b"", lunsel=0):
        b = bytes([lunsel, len(cdb)]) + cdb
        b += bytes([len(out)]) + b"".join(struct.pack("<HB", n, 0) for n in out)
        b += bytes([len(inb)]) + b"".join(struct.pack("<HB", n, 0xEE) for n in inb)
        return b + payload
    unmap = struct.pack(">HH", 22, 16) + bytes(4) + struct.pack(">QI", 8, 8) + bytes(4)
    mode_param = bytes([0x13, 0, 0, 0]) + bytes([0x08, 0x12, 0x04]) + bytes(17)
    return {
        "inquiry": run(bytes([0x12, 0, 0, 0, 96, 0]), inb=[96]),
        "inquiry_vpd83": run(bytes([0x12, 1, 0x83, 0, 255, 0]), inb=[255]),
        "inquiry_vpd_b0": run(bytes([0x12, 1, 0xB0, 0, 64, 0]), inb=[64]),
        "read10": run(bytes([0x28, 0, 0, 0, 0, 1, 0, 0, 2, 0]), inb=[300, 724]),
        "read6_4k": run(bytes([0x08, 0, 0, 1, 1, 0]), inb=[4096], lunsel=2),
        "write16": run(bytes([0x8A, 0]) + struct.pack(">QI", 2, 1) + b"\0\0", out=[512], payload=b"\x5a" * 512),
        "write_same16_unmap": run(bytes([0x93, 0x08]) + struct.pack(">QI", 16, 64) + b"\0\0", out=[512]),
        "unmap": run(bytes([0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0]), out=[24], payload=unmap),
        "verify10_bytchk": run(bytes([0x2F, 0x02, 0, 0, 0, 0, 0, 0, 1, 0]), out=[512]),
        "mode_select6": run(bytes([0x15, 0x10, 0, 0, 24, 0]), out=[24], payload=mode_param),
        "mode_sense10": run(bytes([0x5A, 0, 0x3F, 0, 0, 0, 0, 1, 0, 0]), inb=[256]),
        "report_luns": run(bytes([0xA0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]), inb=[256]),
        "read_capacity10": run(bytes([0x25]) + bytes(9), inb=[8]),
        "request_sense": run(bytes([0x03, 0, 0, 0, 18, 0]), inb=[18], lunsel=3),
        "sync_cache16": run(bytes([0x91, 0]) + bytes(14)),
        "start_stop": run(bytes([0x1B, 0, 0, 0, 1, 0])),
    }


def chain():
    seeds = {
        "ring_three": bytes([0]) + chain3((0x2000, 512, WRITE), (0x3000, 1, WRITE), b"x" * 16)
        + struct.pack("<I", 1 << 20) + struct.pack("<HHB", 4, 100, 1) * 4,
        "ring_cross_region": bytes([0]) + ring([(0xFFF0, 32, NEXT, 1), (0x20000, 64, WRITE, 0)], b"")
        + struct.pack("<I", 1 << 20) + struct.pack("<HHB", 8, 40, 2) * 4,
        "ring_loop": bytes([0]) + ring([(0x1000, 16, NEXT, 1), (0x2000, 16, NEXT, 0)], b""),
    }
    def direct(descs, max_bytes=1 << 20, max_descs=16):
        b = bytes([1, len(descs)])
        for a, l, w in descs:
            b += bytes([0]) + struct.pack("<I", a) if a < 0x40000 else bytes([1]) + struct.pack("<Q", a)
            b += struct.pack("<HB", l, w)
        return b + struct.pack("<IB", max_bytes, max_descs) + struct.pack("<HHB", 3, 50, 7) * 4
    seeds["direct_ok"] = direct([(0x1000, 100, 0), (0x2000, 200, 1), (0x20100, 300, 1)])
    seeds["direct_overlap"] = direct([(0x1000, 100, 0), (0x1010, 200, 1)])
    seeds["direct_hole"] = direct([(0x10000, 100, 0)])
    seeds["direct_overflow"] = direct([(0xFFFFFFFFFFFFFFF0, 0x100, 0)])
    return seeds


def inflight():
    def region(marks, used_idx=0, last=0, version=1, desc_num=16):
        b = struct.pack("<QHHHH", 0, version, desc_num, last, used_idx)
        for h in range(16):
            counter, nxt, infl = marks.get(h, (0, 0, 0))
            b += bytes([infl]) + bytes(5) + struct.pack("<HQ", nxt, counter)
        return b.ljust(320, b"\0")
    return {
        "clean": bytes([0, 0]) + struct.pack("<H", 0) + region({}),
        "two_inflight": bytes([0, 0]) + struct.pack("<H", 5) + region({3: (7, 0, 1), 9: (6, 0, 1)}, used_idx=5),
        "last_batch": bytes([0, 0]) + struct.pack("<H", 6) + region({2: (1, 4, 1), 4: (2, 0, 1), 5: (3, 0, 1)}, used_idx=4, last=2),
        "version0": bytes([1, 0]) + struct.pack("<H", 0) + region({}, version=0),
        "bad_marks": bytes([0, 3]) + struct.pack("<HH", 0, 2) + region({1: (1, 0, 7), 15: (2, 0, 1)}),
    }


def config():
    toml = [
        'socket_path = "/nonexistent/s.sock"\nnull = "1G"\nnum_queues = 4\nthreads = 2\n',
        'socket_path = "s"\ndevice = "scsi"\ntopology = "targets=4,luns=2,storage=null:1M"\n',
        'socket_path = "s"\ndevice = "scsi"\n[topology]\nmax_target = 7\n[[topology.targets]]\nid = 3\n'
        '[[topology.targets.luns]]\nid = 0\nstorage = { kind = "null", size = 1048576 }\n',
        'socket_path = "s"\nmem = "64M"\nblock_size = 4096\nserial = "ABC"\n[completion]\nmsix = "50us"\n',
        'socket_path = "s"\nimage = "/nonexistent/disk.img"\nsize = "1G"\ndirect = true\n',
    ]
    cli = [
        ["--socket-path", "s", "--null", "1G", "--msix-latency", "lognormal:mean=100us,p99=500us"],
        ["--socket-path", "s", "--device", "scsi", "--topology", "0:0=mem:1M,3:1=null:64M,max_target=15,inquiry_delay=2ms"],
        ["--socket-path", "s", "--null", "1G", "--coalesce", "16/100us", "--vector-override", "3:msix=1ms", "--aligned-tick", "100us"],
        ["--socket-path", "s", "--mem", "1G", "--num-queues", "70"],
    ]
    seeds = {f"toml{i}": b"\0" + t.encode() for i, t in enumerate(toml)}
    seeds.update({f"cli{i}": b"\1" + "\0".join(c).encode() for i, c in enumerate(cli)})
    return seeds


def relay():
    """fuzz_targets/relay.rs's operations: a frontend's message sequences."""
    codes = [31, 32, 12, 13, 16, 15]  # the first entries of CODES
    GET_INFLIGHT, SET_INFLIGHT, KICK, CALL, SET_PROTO, GET_PROTO = range(6)

    def msg(code, fsel=0, fds=(), payload=b"\4"):
        """op 0: code index, flag selector, descriptors (kind bytes + fields), payload."""
        return bytes([0, code, fsel, len(fds)]) + b"".join(fds) + payload

    area = lambda nq, qs_log2: bytes([0, nq, qs_log2])
    eventfd, pipe_r, devnull = bytes([1]), bytes([2]), bytes([4])
    u64 = lambda lo, hi=0: bytes([2, lo, hi])
    dims = lambda size, off, nq, qs: bytes([1]) + struct.pack("<QQHH", size, off, nq, qs)
    matching = bytes([0, 0])
    proto_ack = msg(SET_PROTO, payload=u64(0x08))  # REPLY_ACK
    get = msg(GET_INFLIGHT, payload=dims(0, 0, 2, 128))
    install = msg(SET_INFLIGHT, 1, [area(2, 7)], matching)
    seeds = {
        "get_inflight": get,
        "set_inflight": get + install,
        "reply_ack_install_kick_call": proto_ack + get + install
        + msg(KICK, fds=[eventfd], payload=u64(1)) + msg(CALL, fds=[eventfd], payload=u64(1)),
        "kick_nofd": install + msg(KICK, payload=u64(0, 1)),
        "lying_area": msg(SET_INFLIGHT, 1, [area(1, 4)], dims(1 << 40, 4096, 2, 128)),
        "wrong_kind_fds": proto_ack + install + msg(KICK, fds=[pipe_r], payload=u64(0))
        + msg(CALL, 1, [devnull, eventfd], u64(1)),
        "too_many_fds": bytes([0, 6, 0, 0xFF]) + devnull * 33 + b"\4",
        "garbage": bytes([5, 7]) + b"\x1f\0\0\0\1\0",
        "truncated_payload": get + bytes([6]) + struct.pack("<H", 100) + bytes([3]) + b"abc",
        "oversize": get + bytes([7, 0, 0]),
        "unknown_code": bytes([0, 0xF0]) + struct.pack("<I", 0x7777) + bytes([0, 0, 3, 5]) + b"hello",
    }
    return seeds


for target, fn in [("blk_request", blk), ("scsi_request", scsi_request), ("scsi_cdb", scsi_cdb),
                   ("chain", chain), ("inflight", inflight), ("config", config),
                   ("relay", relay)]:
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in fn().items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
