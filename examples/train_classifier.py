"""Train a digit classifier the way a PyTorch tutorial does, with ``import symgrad as torch``:
scikit-learn's handwritten digits (1,797 8x8 images, shipped with scikit-learn), an MLP
with dropout, AdamW with a cosine schedule, a DataLoader, a progress bar (tqdm) and a
PNG plot of the loss curve (matplotlib).

Needs the ``examples`` extra: ``pip install -e ".[examples]"``.
Run: python examples/train_classifier.py [--epochs 30] [--plot loss.png]
"""
import argparse

import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

import symgrad as torch
from symgrad.utils.data import DataLoader, TensorDataset, random_split

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--epochs", type=int, default=30)
p.add_argument("--plot", default="train_classifier.png", help="PNG of the loss curve ('' for none)")
args = p.parse_args()

torch.manual_seed(0)
digits = load_digits()
X = torch.tensor((digits.data / 16.0).astype(np.float32))       # pixels in [0, 1]
y = torch.tensor(digits.target)
train, test = random_split(TensorDataset(X, y), [0.8, 0.2],
                           generator=torch.Generator().manual_seed(0))
loader = DataLoader(train, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(1))

model = torch.nn.Sequential(
    torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Dropout(0.2),
    torch.nn.Linear(128, 10),
)
loss_fn = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)


def accuracy(dataset) -> float:
    model.eval()
    with torch.no_grad():
        xs, ys = next(iter(DataLoader(dataset, batch_size=len(dataset))))
        correct = (model(xs).argmax(dim=1) == ys).sum().item()
    model.train()
    return correct / len(dataset)


losses = []
for epoch in (bar := tqdm(range(args.epochs), desc="training", unit="epoch")):
    total = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(xb)
    scheduler.step()
    losses.append(total / len(train))
    bar.set_postfix(loss=f"{losses[-1]:.4f}")

print(model)
print(f"train loss {losses[-1]:.4f}, test accuracy {accuracy(test):.3f}")

if args.plot:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(range(1, len(losses) + 1), losses)
    ax.set(xlabel="epoch", ylabel="cross-entropy (train)", yscale="log",
           title="digits MLP, symgrad eager")
    fig.tight_layout()
    fig.savefig(args.plot, dpi=100)
    print(f"loss curve: {args.plot}")
