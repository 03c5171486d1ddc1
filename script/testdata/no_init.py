"""Never calls init_process_group."""
import torch
print("computing alone:", torch.ones(2).sum().item())
