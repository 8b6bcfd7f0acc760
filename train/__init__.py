"""Training: LoRA SFT and GRPO on the train split (trl, peft, torch), the rewards they use, run manifests and configs."""
