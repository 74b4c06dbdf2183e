"""Adapters for the trainers people already use: their datasets and policies fed from a lake."""
