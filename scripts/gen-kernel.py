#!/usr/bin/env python3
"""Turns a compiled kernel (SPIR-V + spirv-cross --reflect JSON) into C.

  kernel   : build/gen/kernels/<name>.c (the SPIR-V words and a vkrt_kernel_desc) and
             build/gen/vkrt_kernels/<name>.h (push-constant size, local size, bindings as
             macros, so host structs can be _Static_assert'ed against the shader).
  registry : the table of enabled kernels, in the order configure lists them.
Only the standard library is used, so any python3 runs it."""
import argparse
import json
import os
import sys

SCALAR_SIZES = {"float": 4, "int": 4, "uint": 4, "float16_t": 2, "int16_t": 2, "uint16_t": 2,
                "double": 8, "int64_t": 8, "uint64_t": 8, "bool": 4}


def type_size(types, t):
    """Byte size of a reflected type (std430/push-constant layout, as offsets say)."""
    if t in types:
        members = types[t]["members"]
        if not members:
            return 0
        return max(member_end(types, m) for m in members)
    base = t.rstrip("0123456789")
    n = int(t[len(base):]) if t[len(base):] else 1
    if base.startswith(("vec", "ivec", "uvec", "f16vec")):
        prefix = {"vec": "float", "ivec": "int", "uvec": "uint", "f16vec": "float16_t"}[base]
        return SCALAR_SIZES[prefix] * n
    if t in SCALAR_SIZES:
        return SCALAR_SIZES[t]
    sys.exit(f"gen-kernel: cannot size reflected type '{t}'")


def member_end(types, m):
    size = type_size(types, m["type"])
    if "array" in m:
        count = 1
        for dim in m["array"]:
            count *= dim
        size = m.get("array_stride", size) * count
    return m["offset"] + size


def shared_bytes(vals):
    """Bytes of the module's workgroup (shared) variables whose sizes are literal: scalars,
    vectors, arrays of constant length and structs, naturally packed. Arrays sized by
    specialization constants are left out (their planners check them: matmul_plan.c)."""
    size, consts, pointee, total = {}, {}, {}, 0
    i = 5  # past the header
    while i < len(vals):
        count, op = vals[i] >> 16, vals[i] & 0xFFFF
        if count == 0:
            sys.exit("gen-kernel: malformed SPIR-V (instruction of no words)")
        a = vals[i + 1:i + count]
        if op in (21, 22):  # OpTypeInt, OpTypeFloat: width in bits
            size[a[0]] = a[1] // 8
        elif op == 20:  # OpTypeBool
            size[a[0]] = 4
        elif op == 23:  # OpTypeVector
            size[a[0]] = size[a[1]] * a[2] if size.get(a[1]) is not None else None
        elif op == 43:  # OpConstant (the low word is enough for a length)
            consts[a[1]] = a[2]
        elif op == 28:  # OpTypeArray: element, length id
            e, n = size.get(a[1]), consts.get(a[2])
            size[a[0]] = e * n if e is not None and n is not None else None
        elif op == 30:  # OpTypeStruct
            m = [size.get(t) for t in a[1:]]
            size[a[0]] = None if None in m else sum(m)
        elif op == 32:  # OpTypePointer: storage class, pointee
            pointee[a[0]] = a[2]
        elif op == 59 and a[2] == 4:  # OpVariable in Workgroup storage
            total += size.get(pointee.get(a[0]), None) or 0
        i += count
    return total


def cmd_kernel(a):
    words = open(a.spv, "rb").read()
    if len(words) % 4:
        sys.exit(f"gen-kernel: {a.spv} is not a whole number of words")
    refl = json.load(open(a.reflect))
    types = refl.get("types", {})
    entry = refl["entryPoints"][0]
    local = entry["workgroup_size"]
    push = 0
    for pc in refl.get("push_constants", []):
        push = max(push, type_size(types, pc["type"]))
    bindings = sorted(s["binding"] for s in refl.get("ssbos", []))
    if any(s.get("set", 0) != 0 for s in refl.get("ssbos", [])):
        sys.exit(f"gen-kernel: {a.name}: only descriptor set 0 is supported")
    if refl.get("ubos") or refl.get("images") or refl.get("textures"):
        sys.exit(f"gen-kernel: {a.name}: only storage buffers are supported")
    if bindings != list(range(len(bindings))):
        sys.exit(f"gen-kernel: {a.name}: bindings must be 0..N-1, got {bindings}")
    n = len(words) // 4
    vals = [int.from_bytes(words[i * 4:i * 4 + 4], "little") for i in range(n)]
    shared = shared_bytes(vals)
    up = a.name.upper()
    os.makedirs(os.path.dirname(a.out_h), exist_ok=True)
    os.makedirs(os.path.dirname(a.out_c), exist_ok=True)
    with open(a.out_h, "w") as h:
        h.write(f"/* Generated from {os.path.basename(a.spv)} by gen-kernel.py; do not edit. */\n")
        h.write(f"#pragma once\n#include \"ops/kernel_desc.h\"\n")
        h.write(f"#define VKRT_KERNEL_{up}_PUSH_SIZE {push}u\n")
        for axis, v in zip("XYZ", local):
            h.write(f"#define VKRT_KERNEL_{up}_LOCAL_SIZE_{axis} {v}u\n")
        h.write(f"#define VKRT_KERNEL_{up}_BINDINGS {len(bindings)}u\n")
        h.write(f"#define VKRT_KERNEL_{up}_SHARED_BYTES {shared}u\n")
        h.write(f"extern const struct vkrt_kernel_desc vkrt_kernel_{a.name};\n")
        h.write(f"/* A host push-constant struct that disagrees with the shader fails the build. */\n"
                f"#define VKRT_KERNEL_{up}_CHECK_PUSH(type) \\\n"
                f"  _Static_assert(sizeof(type) == VKRT_KERNEL_{up}_PUSH_SIZE, \\\n"
                f"                 \"push constants of \" #type \" disagree with kernel {a.name} \"\\\n"
                f"                 \"(reflected size {push} bytes)\")\n")
    with open(a.out_c, "w") as c:
        c.write(f"/* Generated from {os.path.basename(a.spv)} by gen-kernel.py; do not edit. */\n")
        c.write(f"#include \"vkrt_kernels/{a.name}.h\"\n")
        c.write(f"static const uint32_t spirv[{n}] = {{\n")
        for i in range(0, n, 8):
            c.write("  " + ", ".join(f"0x{v:08x}" for v in vals[i:i + 8]) + ",\n")
        c.write("};\n")
        c.write(f"const struct vkrt_kernel_desc vkrt_kernel_{a.name} = {{\n"
                f"  .name = \"{a.name}\",\n  .code = spirv,\n  .code_size = sizeof(spirv),\n"
                f"  .push_size = {push},\n  .local_size = {{{local[0]}, {local[1]}, {local[2]}}},\n"
                f"  .binding_count = {len(bindings)},\n  .shared_bytes = {shared},\n}};\n")


def write_if_changed(path, text):
    if os.path.exists(path) and open(path).read() == text:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def cmd_registry(a):
    names = [n for n in a.names if n != "-"]
    h = ["/* Generated by gen-kernel.py: the kernels this configuration enables. */",
         "#pragma once", "#include \"ops/kernel_desc.h\"", "enum vkrt_kernel_id {"]
    h += [f"  VKRT_KERNEL_ID_{n.upper()}," for n in names]
    h += ["  VKRT_KERNEL_ID_COUNT", "};",
          "extern const struct vkrt_kernel_desc *const vkrt_kernel_registry[];",
          "extern const unsigned vkrt_kernel_registry_count;"]
    for n in names:
        h.append(f"#include \"vkrt_kernels/{n}.h\"")
    c = ["/* Generated by gen-kernel.py; do not edit. */",
         "#include \"vkrt_kernels/registry.h\"",
         "const struct vkrt_kernel_desc *const vkrt_kernel_registry[VKRT_KERNEL_ID_COUNT + 1] = {"]
    c += [f"  &vkrt_kernel_{n}," for n in names] + ["  0", "};",
          "const unsigned vkrt_kernel_registry_count = VKRT_KERNEL_ID_COUNT;"]
    write_if_changed(a.out_h, "\n".join(h) + "\n")
    write_if_changed(a.out_c, "\n".join(c) + "\n")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("kernel")
    for opt in ("--name", "--spv", "--reflect", "--out-c", "--out-h"):
        k.add_argument(opt, required=True)
    r = sub.add_parser("registry")
    r.add_argument("--out-c", required=True)
    r.add_argument("--out-h", required=True)
    r.add_argument("names", nargs="*")
    a = p.parse_args()
    cmd_kernel(a) if a.cmd == "kernel" else cmd_registry(a)


if __name__ == "__main__":
    main()
