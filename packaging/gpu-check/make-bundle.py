#!/usr/bin/env python3
"""Pack built binaries with the shared libraries they load, for a bare CUDA machine.

The GPU machines lent to this project have the NVIDIA driver, the CUDA toolkit and Python, but
none of Debian's packages (libtorch, Qt, OpenBLAS...), and what travels there is limited to a
few tens of MiB. Debian's libtorch_cpu alone needs 290 libraries (530 MB: OpenCV, FFmpeg, GDAL,
oneDNN, Qt 5...), nearly all of them for code paths this project never calls.

So this script copies the libraries that are called and replaces the others with *stubs*: a
library with the same soname and symbol versions that defines every symbol the real one
exports. Functions print which library was stubbed and abort; data objects are zero-filled
space of the real size. libtorch is linked with BIND_NOW, so every import must resolve at load
time, which the stubs give; a stub that is *called* stops the program with its name, so a wrong
choice is loud, never silent. Check a bundle on this machine first (run.sh does it with the
bundle's libraries shadowing the system's), then send it.

usage: make-bundle.py OUT_DIR BINARY... [--stub REGEX]...
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Left to the machine: glibc's own libraries (the bundle needs glibc >= the build machine's),
# and the driver's libcuda, which cudart opens.
SYSTEM = re.compile(r"^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libanl|ld-linux-x86-64)\.so")

# Libraries that Debian's libtorch, OpenBLAS, Qt 6 Core and cpp-httplib link but that no code
# path of ours calls: image and video codecs, OpenCV, caffe2's databases, distributed
# transports, ONNX, LAPACK, and ICU (Qt Core uses it for collation, IDNA and time zones). (libtorch creates oneDNN objects while it loads: libdnnl stays.) (cpp-httplib initialises OpenSSL when it loads: libssl stays.)
DEFAULT_STUBS = [
    r"libopencv_", r"libav(codec|format|util|filter|device)\.", r"libsw(scale|resample)\.",
    r"libzmq\.", r"libleveldb\.", r"liblmdb\.", r"libsnappy\.", r"libtensorpipe\.", r"libgloo\.",
    r"libonnx(_proto)?\.", r"libOpenCL\.", r"liblapack\.",
    r"libQt5", r"libicu",
]


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", "-W", path))


def ldd_map(paths):
    """soname -> resolved path, as the loader here resolves them."""
    found = {}
    for p in paths:
        for line in run("ldd", p).splitlines():
            m = re.match(r"\s*(\S+) => (/\S+)", line)
            if m:
                found.setdefault(m.group(1), m.group(2))
    return found


def exported_symbols(path):
    """[(name, type, size, version-or-None)] for the defined dynamic symbols of a library."""
    syms = []
    for line in run("readelf", "--dyn-syms", "-W", path).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or f[6] in ("UND", "ABS"):  # ABS: version names
            continue
        kind, bind = f[3], f[4]
        if bind not in ("GLOBAL", "WEAK") or kind not in ("FUNC", "OBJECT", "TLS", "IFUNC", "NOTYPE"):
            continue
        name, version = f[7], None
        if "@@" in name:
            name, version = name.split("@@", 1)
        elif "@" in name:
            continue  # a non-default (old) version: nothing links against it anew
        size = int(f[2], 0) if f[2].startswith("0x") else int(f[2])
        syms.append((name, kind, size, version))
    return syms


def make_stub(soname, real_path, out_path, workdir):
    syms = exported_symbols(real_path)
    quote = lambda s: '"' + s + '"'
    # Every stubbed function jumps here with its name in %rsi and the name's length in %rdx:
    # write "<library> stub called: <name>" to stderr, then exit_group(134).
    prefix = f"ragraph bundle: {soname} is a stub (packaging/gpu-check/make-bundle.py); called: "
    asm = [".text", "__ragwb_stub_called:",
           "  push %rsi", "  push %rdx",
           "  mov $1, %eax", "  mov $2, %edi", "  lea __ragwb_prefix(%rip), %rsi",
           f"  mov ${len(prefix.encode())}, %edx", "  syscall",
           "  pop %rdx", "  pop %rsi", "  mov $1, %eax", "  mov $2, %edi", "  syscall",
           "  mov $1, %eax", "  mov $2, %edi", "  lea __ragwb_newline(%rip), %rsi", "  mov $1, %edx",
           "  syscall",
           "  mov $231, %eax", "  mov $134, %edi", "  syscall", "  ud2",
           ".section .rodata", "__ragwb_prefix: .ascii " + quote(prefix), '__ragwb_newline: .ascii "\\n"']
    versions = {}
    for name, kind, size, version in syms:
        versions.setdefault(version, []).append(name)
        q = quote(name)
        if kind in ("FUNC", "IFUNC", "NOTYPE"):
            asm += [".text", f".globl {q}", f".type {q},@function", f"{q}:",
                    f"  lea __ragwb_name{len(asm)}(%rip), %rsi", f"  mov ${len(name.encode())}, %edx",
                    "  jmp __ragwb_stub_called",
                    ".section .rodata", f"__ragwb_name{len(asm)}: .ascii {q}"]
        elif kind == "TLS":
            asm += ['.section .tbss,"awT",@nobits', f".globl {q}", f".type {q},@object",
                    f".size {q},{max(size, 1)}", f"{q}: .zero {max(size, 1)}"]
        else:
            asm += [".data", ".balign 16", f".globl {q}", f".type {q},@object",
                    f".size {q},{max(size, 1)}", f"{q}: .zero {max(size, 1)}"]
    s_file = os.path.join(workdir, soname + ".s")
    with open(s_file, "w") as f:
        f.write("\n".join(asm) + "\n")
    cmd = ["gcc", "-shared", "-nostdlib", "-o", out_path, s_file, f"-Wl,-soname,{soname}"]
    named = [v for v in versions if v]
    if named:
        v_file = os.path.join(workdir, soname + ".map")
        with open(v_file, "w") as f:
            for v in named:
                f.write(v + " { global:\n" + "".join(f'  "{n}";\n' for n in versions[v]) + "};\n")
            # Exports named in no node stay global and unversioned, as in the real library.
        cmd.append(f"-Wl,--version-script={v_file}")
    subprocess.run(cmd, check=True)
    return len(syms)


def main():
    args = sys.argv[1:]
    stubs = list(DEFAULT_STUBS)
    while "--stub" in args:
        i = args.index("--stub")
        stubs.append(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    out, binaries = args[0], args[1:]
    is_stub = lambda soname: any(re.match(p, soname) for p in stubs)
    where = ldd_map(binaries)
    lib_dir = os.path.join(out, "lib")
    os.makedirs(lib_dir, exist_ok=True)
    os.makedirs(os.path.join(out, "bin"), exist_ok=True)
    for b in binaries:
        shutil.copy2(b, os.path.join(out, "bin", os.path.basename(b)))
    real, stubbed, queue = {}, {}, [n for b in binaries for n in needed(b)]
    while queue:
        soname = queue.pop()
        if soname in real or soname in stubbed or SYSTEM.match(soname):
            continue
        if soname not in where:
            sys.exit(f"make-bundle: the loader here does not resolve {soname}")
        if is_stub(soname):
            stubbed[soname] = where[soname]
            continue
        real[soname] = os.path.realpath(where[soname])
        queue += needed(real[soname])
    for soname, path in sorted(real.items()):
        shutil.copyfile(path, os.path.join(lib_dir, soname))
        os.chmod(os.path.join(lib_dir, soname), 0o755)
    with tempfile.TemporaryDirectory() as work:
        for soname, path in sorted(stubbed.items()):
            n = make_stub(soname, path, os.path.join(lib_dir, soname), work)
            print(f"stub {soname}: {n} symbols", file=sys.stderr)
    size = sum(os.path.getsize(os.path.join(lib_dir, f)) for f in os.listdir(lib_dir))
    print(f"make-bundle: {len(real)} libraries copied, {len(stubbed)} stubbed, {size / 1e6:.1f} MB in {lib_dir}")


if __name__ == "__main__":
    main()
