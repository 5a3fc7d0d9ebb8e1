"""Every cuzk.v1 RPC from Python grpcio (gRPC's C core), on default channel
options, against a running kiln daemon. Run by tests/e2e/python.rs:

    python3 grpc_client.py STUBS_DIR TARGET

TARGET is what grpc.insecure_channel takes: unix:/path/to/kiln.sock or
HOST:PORT. Prints one JSON object with what each call answered; any RPC
error ends the script with a traceback and a non-zero exit.
"""

import json
import sys
import time

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from cuzk.v1 import proving_pb2 as pb  # noqa: E402
from cuzk.v1 import proving_pb2_grpc as rpc  # noqa: E402


def synthetic(request_id, log_size, partitions):
    return pb.SubmitProofRequest(
        request_id=request_id,
        proof_kind=pb.KILN_SYNTHETIC,
        synthetic_log_size=log_size,
        synthetic_partitions=partitions,
    )


def main():
    target = sys.argv[2]
    out = {"grpc_version": grpc.__version__}
    # Default options: the channel sends whatever :authority grpcio picks
    # for the target (for unix: the percent-encoded socket path).
    with grpc.insecure_channel(target) as channel:
        stub = rpc.ProvingEngineStub(channel)
        status = stub.GetStatus(pb.GetStatusRequest(), timeout=30)
        out["status_backends"] = list(status.backends)
        out["metrics_has_build_info"] = "kiln_build_info" in stub.GetMetrics(pb.GetMetricsRequest(), timeout=30).prometheus_text

        preload = stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="synthetic-filecoin-like-2^8"), timeout=120)
        out["preload_already_loaded"] = preload.already_loaded

        proved = stub.Prove(pb.ProveRequest(submit=synthetic("py-prove", 8, 1)), timeout=120).result
        out["prove"] = {"status": pb.AwaitProofResponse.Status.Name(proved.status), "proof_bytes": len(proved.proof), "error": proved.error_message}

        submitted = stub.SubmitProof(synthetic("py-submit", 8, 2), timeout=30)
        awaited = stub.AwaitProof(pb.AwaitProofRequest(job_id=submitted.job_id, timeout_ms=0), timeout=120)
        out["await"] = {"status": pb.AwaitProofResponse.Status.Name(awaited.status), "proof_bytes": len(awaited.proof)}

        # A long job holds the only synthesis worker; the job queued behind
        # it is cancelled while it waits, then the long one too.
        long_job = stub.SubmitProof(synthetic("py-long", 10, 64), timeout=30)
        queued = stub.SubmitProof(synthetic("py-queued", 8, 1), timeout=30)
        cancel = stub.CancelProof(pb.CancelProofRequest(job_id=queued.job_id), timeout=30)
        after = stub.AwaitProof(pb.AwaitProofRequest(job_id=queued.job_id, timeout_ms=10000), timeout=30)
        stub.CancelProof(pb.CancelProofRequest(job_id=long_job.job_id), timeout=30)
        out["cancel"] = {"found": cancel.found, "was_running": cancel.was_running, "then": pb.AwaitProofResponse.Status.Name(after.status)}

        evict = stub.EvictSRS(pb.EvictSrsRequest(circuit_id="synthetic-filecoin-like-2^8"), timeout=30)
        out["evict"] = {"was_loaded": evict.was_loaded, "freed_bytes": evict.freed_bytes}

        try:
            stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="no-such-circuit"), timeout=30)
            out["unknown_preload"] = "OK"
        except grpc.RpcError as e:
            out["unknown_preload"] = e.code().name
        deadline = time.time() + 30
        while stub.GetStatus(pb.GetStatusRequest(), timeout=30).queues and time.time() < deadline:
            time.sleep(0.05)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
