"""The packed emoji set (build_dataset.sh) held on the training device, and batches drawn from it."""
import numpy as np
import torch


class EmojiData:
    """All images live on the device as uint8 NHWC (under 100 MB), so a batch is one gather: no loader
    processes, no host-to-device copies in the loop."""

    def __init__(self, path, device):
        with np.load(path) as packed:
            images, labels, val = packed["images"], packed["labels"], packed["val"]
            bases = packed["bases"]
            self.class_names = [str(name) for name in packed["class_names"]]
        self.null_class = len(self.class_names)

        train = ~val
        self.train_images = torch.from_numpy(images[train]).to(device)  # (N, 64, 64, 3) uint8
        self.train_labels = torch.from_numpy(labels[train]).to(device)  # (N,) int64
        self.val_images = torch.from_numpy(images[val]).to(device)
        self.val_labels = torch.from_numpy(labels[val]).to(device)

        # Each base emoji weighs as much as any other: People & Body has up to 6 skin-tone versions of
        # each emoji, which would otherwise make it most of the data.
        _, group, group_size = np.unique(bases[train], return_inverse=True, return_counts=True)
        self.train_weights = torch.from_numpy(1.0 / group_size[group]).float().to(device)

    def train_batch(self, batch_size, generator):
        """Returns x0 (B, 3, 64, 64) in [-1, 1] (channels_last memory) with random horizontal flips,
        and labels (B,). Some emoji are asymmetric (arrows, text); flipped ones are still plausible emoji."""
        index = torch.multinomial(self.train_weights, batch_size, replacement=True, generator=generator)
        x0 = to_model_range(self.train_images[index])
        flip = torch.rand(batch_size, device=x0.device, generator=generator) < 0.5
        x0 = torch.where(flip[:, None, None, None], x0.flip(3), x0)
        return x0.contiguous(memory_format=torch.channels_last), self.train_labels[index]


def to_model_range(images):
    """uint8 (B, H, W, 3) -> float (B, 3, H, W) in [-1, 1]; the permute leaves it channels_last in memory."""
    return images.permute(0, 3, 1, 2).float() / 127.5 - 1.0


def to_uint8(x):
    """float (B, 3, H, W) in [-1, 1] -> uint8 numpy (B, H, W, 3)."""
    return ((x.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()
