"""The backbone's input tokens of a PackedBatch, shared by both model families.

Every camera view goes through the vision encoder and becomes `tokens_per_view` tokens, the
instruction's ids go through an embedding, and each stream-history message goes through its
stream's small MLP over (values, time offset). All are scattered onto the packed token axis in
the batch contract's order (sample i's views, then its text, then its history, at
`cu_seqlens[i]`), and learned positions are added from `position_ids`. GR00T's backbone and pi0's
prefix start from exactly these tokens, so the same packed shards feed both unchanged.
"""

from __future__ import annotations

import torch
from torch import nn

from robolake.schemas.batch import PackedBatch
from robolake.training.config import ModelConfig
from robolake.training.encoders import StreamTokenEncoder, sinusoidal_embedding

__all__ = ["DT_FEATURES", "BackboneTokens", "check_batch"]

DT_FEATURES = 8  # sinusoidal features of a history token's time offset (seconds before its sample)


def check_batch(config: ModelConfig, b: PackedBatch, *, has_history_encoder: bool) -> None:
    """Refuse a batch the model was not sized for, saying what to change.

    Raises:
        ValueError: tokens per view, sample length, widths, horizon, history or embodiment ids
            do not fit `config`.
    """
    c = config
    if b.tokens_per_view != c.tokens_per_view:
        raise ValueError(f"batch has tokens_per_view={b.tokens_per_view} but the model expects {c.tokens_per_view}")
    if b.max_seqlen > c.max_positions:
        raise ValueError(
            f"a sample has {b.max_seqlen} tokens, more than max_positions={c.max_positions}; "
            "raise it or pack shorter samples"
        )
    if b.state.shape[-1] != c.max_state_dim or b.action.shape[-1] != c.max_action_dim:
        raise ValueError(
            f"batch state/action widths {b.state.shape[-1]}/{b.action.shape[-1]} differ from the model's "
            f"max_state_dim/max_action_dim {c.max_state_dim}/{c.max_action_dim}"
        )
    if b.action.shape[1] != c.action_horizon:
        raise ValueError(f"batch action horizon {b.action.shape[1]} differs from the model's {c.action_horizon}")
    if b.history_values is not None and b.history_values.shape[0] and not has_history_encoder:
        raise ValueError(
            "the batch carries stream-history tokens but the model has no history encoder; size the model to the "
            "data (`size_model_config`) so that history_streams and history_width are set"
        )
    if b.history_values is not None and b.history_values.shape[0] and b.history_values.shape[1] != c.history_width:
        raise ValueError(f"history tokens have {b.history_values.shape[1]} values, the model expects {c.history_width}")
    if b.embodiment_id.device.type == "cpu" and b.num_samples and int(b.embodiment_id.max()) >= c.num_embodiments:
        raise ValueError(f"embodiment id {int(b.embodiment_id.max())} >= num_embodiments={c.num_embodiments}")


class BackboneTokens:
    """Scatters a batch's view, text and history tokens onto the packed axis (no weights of its own).

    It borrows the model's encoders rather than owning them, so each model keeps its parameter
    names (and its checkpoints) as they were.
    """

    def __init__(
        self,
        vision: nn.Module,
        text: nn.Embedding,
        position: nn.Embedding,
        history_encoder: StreamTokenEncoder | None,
        d_model: int,
    ) -> None:
        self.vision, self.text, self.position = vision, text, position
        self.history_encoder, self.d_model = history_encoder, d_model

    def __call__(self, b: PackedBatch) -> torch.Tensor:
        """[total_tokens, d_model] backbone inputs in packed order, positions added."""
        n, tpv, dev = b.num_samples, b.tokens_per_view, b.cu_seqlens.device
        starts = b.cu_seqlens[:-1].long()
        views = b.views_per_sample
        first_view = torch.cumsum(views, 0) - views
        vsi = b.view_sample_index
        rank = torch.arange(vsi.shape[0], device=dev) - first_view[vsi]
        view_pos = (starts[vsi] + rank * tpv)[:, None] + torch.arange(tpv, device=dev)
        text_len = b.text_lengths
        tsi = torch.repeat_interleave(torch.arange(n, device=dev), text_len, output_size=b.text_ids.shape[0])
        text_pos = (
            starts[tsi] + views[tsi] * tpv + torch.arange(b.text_ids.shape[0], device=dev) - b.cu_text[:-1].long()[tsi]
        )
        vis = self.vision(b.pixels).flatten(0, 1)
        txt = self.text(b.text_ids).to(vis.dtype)
        x = vis.new_zeros(b.total_tokens, self.d_model)
        x = x.index_copy(0, view_pos.flatten(), vis).index_copy(0, text_pos, txt)
        if (
            self.history_encoder is not None
            and b.history_values is not None
            and b.history_dt is not None
            and b.history_stream is not None
            and b.cu_history is not None
            and b.history_values.shape[0]
        ):
            x = self._history(
                self.history_encoder,
                (b.history_values, b.history_dt, b.history_stream, b.cu_history),
                x,
                starts,
                views * tpv + text_len,
            )
        return x + self.position(b.position_ids).to(x.dtype)

    @staticmethod
    def _history(
        encoder: StreamTokenEncoder,
        history: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
        x: torch.Tensor,
        starts: torch.Tensor,
        before: torch.Tensor,
    ) -> torch.Tensor:
        """x with each sample's history tokens (values, dt, stream ids, cu_history) placed after its views and text."""
        values, dt, stream, cu_history = history
        dev, total = x.device, int(values.shape[0])
        hist_len = (cu_history[1:] - cu_history[:-1]).long()
        hsi = torch.repeat_interleave(torch.arange(hist_len.shape[0], device=dev), hist_len, output_size=total)
        hist_pos = starts[hsi] + before[hsi] + torch.arange(total, device=dev) - cu_history[:-1].long()[hsi]
        feats = torch.cat([values.to(x.dtype), sinusoidal_embedding(dt * 100.0, DT_FEATURES).to(x.dtype)], dim=-1)
        return x.index_copy(0, hist_pos, encoder(feats, stream).to(x.dtype))
