"""A short autograd demo: fit y = 3x - 1 with a hand-written linear model and plain gradient descent."""

import tinyattn as ta


def main():
    ta.manual_seed(0)
    x = ta.randn(64, 1)
    y = 3 * x - 1
    w = ta.zeros(1, 1, requires_grad=True)
    b = ta.zeros(1, requires_grad=True)
    for step in range(200):
        loss = ((x @ w + b - y) ** 2).mean()
        w.grad = b.grad = None
        loss.backward()
        with ta.no_grad():
            w.data -= 0.1 * w.grad
            b.data -= 0.1 * b.grad
        if step % 50 == 0:
            print(f"step {step:3d}  loss {loss.item():.6f}")
    print(f"learned w = {w.item():.4f}, b = {b.item():.4f} (target 3, -1); final loss {loss.item():.2e}")


if __name__ == "__main__":
    main()
