"""Rank 0's progress bar of one epoch (train.py, train_tf.py): no dependency."""
import sys
import time


class Progress:
    """Rank 0's bar for one epoch: redrawn in place with \\r on a terminal,
    a plain line every 10% otherwise (logs, CI)."""

    def __init__(self, epoch, epochs, steps, enabled):
        self.epoch, self.epochs, self.steps, self.enabled = epoch, epochs, steps, enabled
        self.tty = enabled and sys.stdout.isatty()
        self.start = time.perf_counter()
        self.next_line = 0.1
        self.last_draw = 0.0

    def update(self, step, images, loss):
        if not self.enabled:
            return
        done = step / max(self.steps, 1)
        now = time.perf_counter()
        elapsed = now - self.start
        rate = images / elapsed if elapsed > 0 else 0.0
        text = f"epoch {self.epoch}/{self.epochs} {step}/{self.steps} {rate:7.0f} img/s loss {loss:.4f}"
        if self.tty:
            if now - self.last_draw < 0.1 and step != self.steps:
                return
            self.last_draw = now
            width = 30
            filled = int(width * done)
            bar = "=" * filled + (">" if filled < width else "") + " " * (width - filled - 1)
            sys.stdout.write(f"\r[{bar}] {100 * done:3.0f}% {text}")
            if step == self.steps:
                sys.stdout.write("\n")
            sys.stdout.flush()
        elif done >= self.next_line or step == self.steps:
            while self.next_line <= done:
                self.next_line += 0.1
            print(f"  {100 * done:3.0f}% {text}", flush=True)
