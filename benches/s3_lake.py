#!/usr/bin/env python3
"""The lake on object storage, measured: uploads a lake to a moto S3 server on loopback and runs
the month's reports from the bucket and from the disk, side by side, counting the S3 requests
gpuledger makes (from the server's request log).

    python benches/s3_lake.py --lake /tmp/gpuledger-bench/month --month 2026-10 \
        --gpuledger target/release/gpuledger            # a Python with moto[server] and boto3

moto is an in-memory test server in Python, far slower per request than S3 or MinIO: the request
counts carry over to a real store, the times are an upper bound on this machine.
"""
import argparse, collections, concurrent.futures, os, re, socket, subprocess, sys, tempfile, time

import boto3


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lake", required=True)
    ap.add_argument("--month", required=True)
    ap.add_argument("--gpuledger", default="target/release/gpuledger")
    ap.add_argument("--reports", default="chargeback,idle")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="gpuledger-s3-bench-")
    port = free_port()
    log_path = os.path.join(work, "moto.log")
    log = open(log_path, "w")
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1")
        for _ in range(100):
            try:
                s3.list_buckets()
                break
            except Exception:
                time.sleep(0.2)
        s3.create_bucket(Bucket="bench")
        files = []
        for root, _, names in os.walk(args.lake):
            for n in names:
                p = os.path.join(root, n)
                files.append((p, "month/" + os.path.relpath(p, args.lake)))
        total = sum(os.path.getsize(p) for p, _ in files)
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda f: s3.upload_file(f[0], "bench", f[1]), files))
        print(f"uploaded {len(files)} files, {total / 1e6:.1f} MB in {time.time() - t0:.1f} s", file=sys.stderr)

        cfg = os.path.join(work, "s3.toml")
        with open(cfg, "w") as f:
            f.write(f'[lake]\npath = "s3://bench/month"\n\n[lake.s3]\nendpoint = "{endpoint}"\nregion = "us-east-1"\npath_style = true\nallow_http = true\n')
        env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
        print("| report | lake | best of %d (s) | S3 requests | GET / HEAD / LIST / PUT |" % args.repeat)
        print("|---|---|---:|---:|---|")
        for kind in args.reports.split(","):
            outputs = {}
            for where, lake_args in (("disk", ["--lake", args.lake]), ("bucket", ["--config", cfg])):
                times = []
                for i in range(args.repeat):
                    log.flush()
                    start = os.path.getsize(log_path)
                    t = time.time()
                    out = subprocess.run([args.gpuledger, "--progress", "never", *lake_args, "report", kind, "--month", args.month, "--format", "csv"], env=env, capture_output=True)
                    times.append(time.time() - t)
                    if out.returncode != 0:
                        sys.exit(f"{kind} on the {where}: {out.stderr.decode()}")
                    outputs[where] = out.stdout
                    time.sleep(0.3)
                    with open(log_path) as f:
                        f.seek(start)
                        # werkzeug colours some lines (206, 404) with ANSI escapes
                        lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in f]
                        lines = [l for l in lines if re.search(r'" [234]\d\d ', l)]
                kinds = collections.Counter()
                for l in lines:
                    m = re.search(r'"(GET|HEAD|PUT|DELETE|POST) (\S+)', l)
                    if m:
                        kinds["LIST" if m.group(1) == "GET" and ("list-type" in m.group(2) or "delimiter" in m.group(2)) else m.group(1)] += 1
                req = sum(kinds.values())
                split = "" if where == "disk" else " / ".join(str(kinds[k]) for k in ("GET", "HEAD", "LIST", "PUT"))
                print(f"| {kind} | {where} | {min(times):.2f} | {'' if where == 'disk' else req} | {split} |")
            if outputs["disk"].count(b"\n") < 3:
                sys.exit(f"{kind}: an empty report for {args.month}: is that the lake's month?")
            if outputs["disk"] != outputs["bucket"]:
                sys.exit(f"{kind}: the report from the bucket differs from the report from the disk")
        print(f"\nreports from the bucket equal the reports from the disk, byte for byte ({args.reports})", file=sys.stderr)
    finally:
        server.kill()


if __name__ == "__main__":
    main()
