"""Trainers: ``torch_trainer.TorchTrainer`` (built in: one device, LoRA or full) and
``slime.SlimeTrainer`` (optional: Slime on Ray + Megatron). Import the module you need;
this package imports neither (they need torch or slime)."""

from __future__ import annotations

TRAINERS = {
    "torch": "reefd.trainers.torch_trainer:TorchTrainer",
    "slime": "reefd.trainers.slime:SlimeTrainer",
}
