#!/usr/bin/env python3
"""Fashion-MNIST: a small CNN trained one way per --mode, the same model,
data, sharding and optimizer everywhere, so the runs can be compared.

    python3 train.py --mode single
    chorusrun -np 2 python3 train.py --mode ddp --backend chorus
    chorusrun -np 2 python3 train.py --mode ddp --backend gloo --fp16-hook
    chorusrun -np 2 python3 train.py --mode mirrored
    chorusrun -np 3 --ps 1 python3 train.py --mode ps --ps-mode bounded --max-staleness 1

--batch-size is per rank: one step trains ranks x batch-size images (the
global batch), each rank its own shard of the epoch (DistributedSampler: one
permutation per epoch, seeded by --seed and the epoch, dealt round-robin).
The learning rate is not scaled with the ranks. See README.md beside this file.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import fashion_mnist
from progress import Progress
from fashion_mnist import DATA_DIR, MEAN, STD
MODES = ["single", "ddp", "mirrored", "ps"]


# ---------------------------------------------------------------- data

def load_fashion_mnist(data_dir=DATA_DIR):
    """(train_images, train_labels, test_images, test_labels) as uint8 and int64 tensors."""
    try:
        arrays = fashion_mnist.load(data_dir)
    except FileNotFoundError as e:
        sys.exit(str(e))
    images, labels, test_images, test_labels = (torch.from_numpy(a) for a in arrays)
    return images, labels.long(), test_images, test_labels.long()


def to_input(images_u8):
    """uint8 (N, 28, 28) -> normalised float32 (N, 1, 28, 28)."""
    return ((images_u8.float() / 255.0 - MEAN) / STD).unsqueeze(1)


def epoch_indices(n, rank, ranks, epoch, seed):
    """This rank's indices of the epoch, as DistributedSampler(shuffle=True,
    drop_last=False) deals them: one permutation for every rank (seed + epoch),
    padded to a multiple of ranks, rank r takes positions r, r + ranks, ..."""
    sampler = torch.utils.data.DistributedSampler(range(n), num_replicas=ranks, rank=rank,
                                                  shuffle=True, seed=seed)
    sampler.set_epoch(epoch)
    return torch.tensor(list(sampler), dtype=torch.long)


# ---------------------------------------------------------------- model

class Net(nn.Module):
    """2 conv + 2 fully connected, about 109k parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3)    # 28 -> 26, pool -> 13
        self.conv2 = nn.Conv2d(16, 32, 3)   # 13 -> 11, pool -> 5
        self.fc1 = nn.Linear(32 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def torch_optimizer(name, params, lr):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    return torch.optim.Adam(params, lr=lr)  # betas (0.9, 0.999), eps 1e-8: chorus's defaults too


# ---------------------------------------------------------------- ranks

def launcher_rank():
    """(rank, ranks) from chorusrun's CHORUS_* or torchrun's RANK/WORLD_SIZE; (0, 1) alone."""
    for r, w in (("CHORUS_RANK", "CHORUS_WORLD_SIZE"), ("RANK", "WORLD_SIZE")):
        if r in os.environ and w in os.environ:
            return int(os.environ[r]), int(os.environ[w])
    return 0, 1


def tf_config_servers():
    """The ps tasks of TF_CONFIG (chorusrun --ps K writes it), else 1."""
    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    return len(cluster.get("ps", [])) or 1


def init_torch_distributed(backend, rank, ranks):
    """The default process group. Under torchrun (MASTER_ADDR/PORT set): env://.
    Under chorusrun: rank 0 opens a TCPStore on a free port of 127.0.0.1 and a
    Chorus communicator (chorusrun's rendezvous) tells the others its port."""
    import torch.distributed as dist
    if backend == "chorus":
        import chorus.torch  # noqa: F401  (registers the backend "chorus")
    if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
        dist.init_process_group(backend, rank=rank, world_size=ranks)
        return
    import chorus
    from datetime import timedelta
    comm = chorus.init()
    port = np.zeros(1, np.int64)
    store = None
    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, ranks, is_master=True, timeout=timedelta(seconds=60),
                              wait_for_workers=False)
        port[0] = store.port
    comm.broadcast(port, root=0)
    comm.destroy()
    if rank != 0:
        store = dist.TCPStore("127.0.0.1", int(port[0]), ranks, is_master=False,
                              timeout=timedelta(seconds=60))
    dist.init_process_group(backend, store=store, rank=rank, world_size=ranks)


class Sum:
    """Sums small float64 vectors over the ranks with the mode's own communication."""

    def __init__(self, mode, comm=None):
        self.mode, self.comm = mode, comm

    def __call__(self, values):
        a = np.asarray(values, np.float64).copy()
        if self.mode == "ddp":
            import torch.distributed as dist
            t = torch.from_numpy(a)
            dist.all_reduce(t)
            return t.numpy()
        if self.mode in ("mirrored", "ps"):
            self.comm.allreduce(a)
        return a


# ---------------------------------------------------------------- training

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=MODES, default="single",
                   help="single: one process; ddp: torch DistributedDataParallel; mirrored: "
                        "chorus.Mirrored; ps: chorus.ParameterServer (start with chorusrun --ps K)")
    p.add_argument("--ps-mode", choices=["async", "sync", "bounded"], default="async",
                   help="--mode ps: how the servers apply the workers' gradients")
    p.add_argument("--max-staleness", type=int, default=1,
                   help="--mode ps --ps-mode bounded: steps a worker may run ahead of the slowest")
    p.add_argument("--servers", type=int, default=None,
                   help="--mode ps: parameter servers, the last ranks (default: TF_CONFIG's ps "
                        "tasks, as chorusrun --ps K writes them)")
    p.add_argument("--backend", choices=["chorus", "gloo"], default="chorus",
                   help="torch.distributed backend of --mode ddp")
    p.add_argument("--fp16-hook", action="store_true",
                   help="--mode ddp: torch's fp16_compress_hook (gradients sent as float16)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64, help="images per rank per step")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default: 1e-3 for adam, 0.05 for sgd and momentum)")
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam"], default="adam",
                   help="momentum: SGD with momentum 0.9; adam: betas (0.9, 0.999), eps 1e-8")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fraction", type=float, default=1.0,
                   help="train only this fraction of each epoch's steps (CI); the test set is whole")
    p.add_argument("--log-json", metavar="PATH",
                   help="rank 0 writes one JSON object per epoch to PATH (JSON lines)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads per rank (default: 1 when ranks > 1, else torch's)")
    p.add_argument("--data-dir", default=DATA_DIR)
    args = p.parse_args(argv)
    if not 0.0 < args.fraction <= 1.0:
        p.error("--fraction must be in (0, 1]")
    if args.lr is None:
        args.lr = 1e-3 if args.optimizer == "adam" else 0.05
    return args


def main(argv=None):
    args = parse_args(argv)
    rank, ranks = launcher_rank()
    if args.mode == "single" and ranks > 1:
        sys.exit("--mode single runs one process: start it without chorusrun -np N > 1")
    if args.mode != "single" and not any(v in os.environ for v in ("CHORUS_RANK", "RANK")):
        sys.exit(f"--mode {args.mode}: start the ranks with chorusrun -np N (or torchrun)")
    threads = args.threads if args.threads is not None else (1 if ranks > 1 else None)
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(args.seed)  # the same initial model everywhere (and broadcast anyway)

    train_x, train_y, test_x, test_y = load_fashion_mnist(args.data_dir)
    model = Net()
    comm = strategy = None
    if args.mode == "ddp":
        import torch.distributed as dist
        init_torch_distributed(args.backend, rank, ranks)
        net = nn.parallel.DistributedDataParallel(model)
        if args.fp16_hook:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            net.register_comm_hook(None, default_hooks.fp16_compress_hook)
        optimizer = torch_optimizer(args.optimizer, net.parameters(), args.lr)
    elif args.mode == "ps":
        import chorus
        world = chorus.init()
        servers = args.servers if args.servers is not None else tf_config_servers()
        # The workers' own communicator (the servers serve): it sums the
        # epoch's statistics. Split before the strategy, while every rank is here.
        is_server = rank >= ranks - servers
        comm = world.split(None if is_server else 0, rank)  # None: no communicator
        strategy = chorus.ParameterServer(world, servers=servers, mode=args.ps_mode,
                                          max_staleness=args.max_staleness)
        for name, param in model.named_parameters():
            param.grad = torch.zeros_like(param)
            strategy.add_variable(f"train/{name}", param.data, param.grad)
        strategy.start()
        if strategy.role == "ps":
            if rank == ranks - servers:
                print(f"ps/{args.ps_mode}: {servers} server(s), {ranks - servers} worker(s)",
                      flush=True)
            strategy.serve(args.optimizer, lr=args.lr,
                           momentum=0.9 if args.optimizer == "momentum" else 0.0)
            strategy.destroy()
            world.destroy()
            return 0
        rank, ranks = comm.rank, comm.size  # from here on: the workers
        net, optimizer = model, None
    elif args.mode == "mirrored":
        import chorus
        comm = chorus.init()
        strategy = chorus.Mirrored(comm)
        for name, param in model.named_parameters():
            # Registered in place: backward accumulates into these very tensors
            # (zeroed with zero_(), never set to None), the strategy reduces and
            # updates them where they lie.
            param.grad = torch.zeros_like(param)
            strategy.add_variable(f"train/{name}", param.data, param.grad)
            param.register_post_accumulate_grad_hook(
                lambda p, n=f"train/{name}": strategy.gradient_ready(n))
        strategy.broadcast_variables()
        net, optimizer = model, None
    else:
        net, optimizer = model, torch_optimizer(args.optimizer, model.parameters(), args.lr)
    total = Sum(args.mode, comm)

    # This rank's contiguous share of the test set; counts summed over ranks.
    test_slice = slice(rank * len(test_x) // ranks, (rank + 1) * len(test_x) // ranks)
    my_test_x, my_test_y = to_input(test_x[test_slice]), test_y[test_slice]

    label = args.mode + (f"/{args.backend}" if args.mode == "ddp" else "") + \
        (f"/{args.ps_mode}" if args.mode == "ps" else "") + \
        ("+fp16" if args.fp16_hook and args.mode == "ddp" else "")
    lead = rank == 0
    if lead:
        print(f"{label}: {ranks} rank(s), {threads or torch.get_num_threads()} thread(s) each, "
              f"batch {args.batch_size}/rank ({args.batch_size * ranks} global), {args.optimizer} "
              f"lr {args.lr}, {args.epochs} epoch(s) x {args.fraction:g} of {len(train_x)} images",
              flush=True)
    log = open(args.log_json, "w") if (lead and args.log_json) else None
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        indices = epoch_indices(len(train_x), rank, ranks, epoch, args.seed)
        steps = max(1, math.ceil(len(indices) / args.batch_size * args.fraction))
        progress = Progress(epoch, args.epochs, steps, lead)
        net.train()
        epoch_start = time.perf_counter()
        loss_sum = seen = 0.0
        for step in range(steps):
            batch = indices[step * args.batch_size:(step + 1) * args.batch_size]
            x, y = to_input(train_x[batch]), train_y[batch]
            if args.mode == "ps":
                strategy.pull()  # the servers' values into the model's parameters
            if strategy is not None:
                for param in model.parameters():
                    param.grad.zero_()
            else:
                optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            if args.mode == "ps":
                strategy.push()  # the gradients to the servers, which apply them
            elif strategy is not None:
                strategy.reduce_gradients()
                strategy.apply(args.optimizer, lr=args.lr,
                               momentum=0.9 if args.optimizer == "momentum" else 0.0)
                strategy.end_step()
            else:
                optimizer.step()
            loss_sum += loss.item() * len(batch)
            seen += len(batch)
            progress.update(step + 1, (seen * ranks), loss_sum / seen)
        train_images, loss_total = total([seen, loss_sum])
        epoch_s = time.perf_counter() - epoch_start  # training only (the sum waits for every rank)

        if args.mode == "ps":
            strategy.pull()  # evaluate the servers' latest values
        net.eval()
        with torch.no_grad():
            correct = sum(int((model(my_test_x[i:i + 1000]).argmax(1) == my_test_y[i:i + 1000]).sum())
                          for i in range(0, len(my_test_y), 1000))
        correct, tested = total([correct, len(my_test_y)])
        record = {"mode": args.mode if args.mode != "ps" else f"ps-{args.ps_mode}",
                  "backend": args.backend if args.mode == "ddp" else None,
                  "fp16_hook": bool(args.fp16_hook and args.mode == "ddp"), "ranks": ranks,
                  "threads": threads or torch.get_num_threads(), "epoch": epoch,
                  "wall_s": round(time.perf_counter() - start, 3), "epoch_s": round(epoch_s, 3),
                  "images": int(train_images), "images_per_s": round(train_images / epoch_s, 1),
                  "train_loss": loss_total / train_images, "test_accuracy": correct / tested,
                  "optimizer": args.optimizer, "lr": args.lr, "batch_size": args.batch_size,
                  "fraction": args.fraction, "seed": args.seed}
        if lead:
            print(f"epoch {epoch}/{args.epochs}: {epoch_s:.1f} s, {record['images_per_s']:.0f} images/s, "
                  f"train loss {record['train_loss']:.4f}, test accuracy {100 * record['test_accuracy']:.2f}%",
                  flush=True)
        if log:
            log.write(json.dumps(record) + "\n")
            log.flush()
    if log:
        log.close()
    if args.mode == "ps":
        if lead and strategy.failed_workers():
            print(f"workers that failed: ranks {strategy.failed_workers()}", flush=True)
        strategy.finish()
        strategy.destroy()
        comm.destroy()
        world.destroy()
    elif strategy is not None:
        strategy.destroy()
        comm.destroy()
    if args.mode == "ddp":
        import torch.distributed as dist
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
