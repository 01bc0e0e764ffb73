"""BatchNorm recalibration: running statistics that make eval mode reproduce train mode.

The engine folds BatchNorm's running statistics into the convs, so they must describe the activations
of the weights being shipped. The EMA model's statistics are an average of the training model's, taken
while its weights moved; recomputing them for the final weights removes that lag.
"""
import copy

import torch

import flow


def _batch_norms(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]


@torch.no_grad()
def recalibrate(model, batches):
    """Replaces every BatchNorm's running mean and variance by their plain average (momentum=None)
    over batches of flow.training_inputs() (targets unused), run in train mode, in float32, without
    gradients. Training batches at random t are the right input: train-mode statistics of such mixed
    batches are what the network was trained to see. Leaves the model in eval mode."""
    norms = _batch_norms(model)
    momenta = [bn.momentum for bn in norms]
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    for x_t, t, labels, _ in batches:
        model(x_t, t, labels)
    for bn, momentum in zip(norms, momenta):
        bn.momentum = momentum
    return model.eval()


@torch.no_grad()
def eval_train_gap(model, x_t, t, labels):
    """||eval(x) - train(x)|| / ||train(x)|| on one batch; train mode runs on a copy, so the model's
    running statistics stay as they are. Leaves the model in eval mode."""
    trained = copy.deepcopy(model).train()(x_t, t, labels)
    evaluated = model.eval()(x_t, t, labels)
    return (torch.linalg.vector_norm(evaluated - trained) / torch.linalg.vector_norm(trained)).item()


def recalibrate_on_training_data(model, data, batches, batch_size, seed):
    """recalibrate() over `batches` fresh training batches (random t, flips, label dropout) drawn from a
    fixed seed, so a checkpoint always calibrates to the same statistics on one machine."""
    generator = torch.Generator(data.train_images.device).manual_seed(seed)
    return recalibrate(model, (flow.training_inputs(data, batch_size, generator) for _ in range(batches)))
