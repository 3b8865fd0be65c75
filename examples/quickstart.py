"""The autograd tutorials' story with symgrad, printing what PyTorch prints.

Run: python examples/quickstart.py
"""
import symgrad as torch

# 1. requires_grad and grad_fn
x = torch.ones(2, 2, requires_grad=True)
print(x)
y = x + 2
print(y)
print(y.grad_fn.name(), "| x is a leaf:", x.is_leaf, "| y is a leaf:", y.is_leaf)

z = y * y * 3
out = z.mean()
print(z, out)

# 2. backward: d(out)/dx = 3 * (x + 2) / 2 = 4.5
out.backward()
print(x.grad)

# 3. gradients accumulate until zeroed
x.sum().backward()
print(x.grad)
x.grad.data.zero_()
x.sum().backward()
print(x.grad)

# 4. vector-Jacobian product: backward of a non-scalar needs the vector v
torch.manual_seed(0)
x = torch.tensor([-0.9332, 1.9616, 0.1739], requires_grad=True)
y = x * 2
i = 0
while y.data.norm() < 1000:
    y = y * 2
    i += 1
print(y, i)
v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
y.backward(v)
print(x.grad)

# 5. no_grad, detach and .data stop tracking
print(x.requires_grad, (x ** 2).requires_grad)
with torch.no_grad():
    print((x ** 2).requires_grad)
print(x.detach().requires_grad)

x = torch.ones(1, requires_grad=True)
y = 2 * x
x.data *= 100          # changes the value, not the recorded graph
y.backward()
print(x, x.grad)

# 6. a one-layer network with a stable loss
x = torch.ones(5)
target = torch.zeros(3)
w = torch.tensor([[-1.1373, 1.5912, -0.0512], [-0.5054, -0.9429, 0.0996],
                  [1.0302, 0.4610, -0.7176], [-1.4975, 0.0401, 1.0779],
                  [0.9736, -0.4620, -0.0244]], requires_grad=True)
b = torch.tensor([0.6149, 0.9079, -0.9704], requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, target)
print("loss:", loss)
loss.backward()
print(b.grad)
