#!/usr/bin/env python3
"""Fashion-MNIST: train.py's CNN in Keras, trained by TensorFlow's
MultiWorkerMirroredStrategy with its RING collectives (gRPC between workers),
for comparison with train.py's modes. Each worker is a process; TF_CONFIG
names the cluster and this worker's index (without it: one worker).

    TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:20001", "127.0.0.1:20002"]},
                "task": {"type": "worker", "index": 0}}' python3 train_tf.py ...
    (and index 1 in a second process; scripts/train-comparison.sh does this)

The flags are train.py's: --batch-size per worker (the global batch is
workers x batch-size), --epochs, --lr, --optimizer, --seed, --fraction,
--log-json (the chief writes the same records as train.py), --threads.
Needs tensorflow-cpu (examples/train/requirements-tf.txt).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

import fashion_mnist
from fashion_mnist import DATA_DIR, MEAN, STD
from progress import Progress


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64, help="images per worker per step")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default: 1e-3 for adam, 0.05 for sgd and momentum)")
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam"], default="adam")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fraction", type=float, default=1.0,
                   help="train only this fraction of each epoch's steps")
    p.add_argument("--log-json", metavar="PATH", help="the chief writes one JSON object per epoch")
    p.add_argument("--threads", type=int, default=None,
                   help="TensorFlow intra-op threads per worker (default: 1 with 2 workers or more)")
    p.add_argument("--data-dir", default=DATA_DIR)
    args = p.parse_args(argv)
    if not 0.0 < args.fraction <= 1.0:
        p.error("--fraction must be in (0, 1]")
    if args.lr is None:
        args.lr = 1e-3 if args.optimizer == "adam" else 0.05
    return args


def workers_and_index():
    config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
    workers = len(config.get("cluster", {}).get("worker", [])) or 1
    return workers, int(config.get("task", {}).get("index", 0))


def build_model(tf):
    """train.py's Net: conv 16 3x3, pool, conv 32 3x3, pool, fc 128, fc 10."""
    layers = tf.keras.layers
    return tf.keras.Sequential([
        layers.Input((28, 28, 1)),
        layers.Conv2D(16, 3, activation="relu"), layers.MaxPooling2D(2),
        layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(2),
        layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(10),
    ])


def keras_optimizer(tf, name, lr):
    if name == "sgd":
        return tf.keras.optimizers.SGD(lr)
    if name == "momentum":
        return tf.keras.optimizers.SGD(lr, momentum=0.9)
    return tf.keras.optimizers.Adam(lr, epsilon=1e-8)  # torch's epsilon


def main(argv=None):
    args = parse_args(argv)
    workers, index = workers_and_index()
    threads = args.threads if args.threads is not None else (1 if workers > 1 else None)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    # First of all TensorFlow calls: the strategy connects the workers.
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    workers = strategy.num_replicas_in_sync  # one CPU replica per worker
    chief = index == 0
    tf.keras.utils.set_random_seed(args.seed)  # the same initial model on every worker

    try:
        train_x, train_y, test_x, test_y = fashion_mnist.load(args.data_dir)
    except FileNotFoundError as e:
        sys.exit(str(e))

    def prepare(images):
        return ((images.astype(np.float32) / 255.0 - MEAN) / STD)[..., None]

    global_batch = args.batch_size * workers
    steps = max(1, math.ceil(len(train_x) / global_batch * args.fraction))
    # Every worker shuffles with the same seed; the strategy shards each global
    # batch by element (AutoShardPolicy.DATA), so the shards are disjoint.
    shard = tf.data.Options()
    shard.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train = (tf.data.Dataset.from_tensor_slices((prepare(train_x), train_y.astype(np.int64)))
             .shuffle(len(train_x), seed=args.seed, reshuffle_each_iteration=True)
             .repeat().batch(global_batch).with_options(shard))
    test = (tf.data.Dataset.from_tensor_slices((prepare(test_x), test_y.astype(np.int64)))
            .batch(1000).with_options(shard))

    with strategy.scope():
        model = build_model(tf)
        optimizer = keras_optimizer(tf, args.optimizer, args.lr)
    per_example = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="none")
    train_iter = iter(strategy.experimental_distribute_dataset(train))
    test_data = strategy.experimental_distribute_dataset(test)

    @tf.function
    def train_step(iterator):
        def step(x, y):
            with tf.GradientTape() as tape:
                # The mean over the global batch: the optimizer sums the
                # replicas' gradients (Keras all-reduces them in apply_gradients).
                loss = tf.nn.compute_average_loss(per_example(y, model(x, training=True)),
                                                  global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=next(iterator)),
                               axis=None)

    @tf.function
    def test_step(x, y):
        def step(x, y):
            return tf.reduce_sum(tf.cast(tf.argmax(model(x, training=False), 1) == y, tf.int64))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=(x, y)), axis=None)

    if chief:
        print(f"tf-mwms/ring: {workers} worker(s), {threads or 'default'} thread(s) each, batch "
              f"{args.batch_size}/worker ({global_batch} global), {args.optimizer} lr {args.lr}, "
              f"{args.epochs} epoch(s) x {args.fraction:g} of {len(train_x)} images", flush=True)
    log = open(args.log_json, "w") if (chief and args.log_json) else None
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        progress = Progress(epoch, args.epochs, steps, chief)
        epoch_start = time.perf_counter()
        loss_sum = 0.0
        for s in range(steps):
            loss_sum += float(train_step(train_iter))
            progress.update(s + 1, (s + 1) * global_batch, loss_sum / (s + 1))
        epoch_s = time.perf_counter() - epoch_start
        correct = sum(int(test_step(x, y)) for x, y in test_data)
        images = steps * global_batch
        record = {"mode": "tf-mwms", "backend": "ring", "fp16_hook": False, "ranks": workers,
                  "threads": threads, "epoch": epoch,
                  "wall_s": round(time.perf_counter() - start, 3), "epoch_s": round(epoch_s, 3),
                  "images": images, "images_per_s": round(images / epoch_s, 1),
                  "train_loss": loss_sum / steps, "test_accuracy": correct / len(test_y),
                  "optimizer": args.optimizer, "lr": args.lr, "batch_size": args.batch_size,
                  "fraction": args.fraction, "seed": args.seed}
        if chief:
            print(f"epoch {epoch}/{args.epochs}: {epoch_s:.1f} s, {record['images_per_s']:.0f} "
                  f"images/s, train loss {record['train_loss']:.4f}, test accuracy "
                  f"{100 * record['test_accuracy']:.2f}%", flush=True)
        if log:
            log.write(json.dumps(record) + "\n")
            log.flush()
    if log:
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
