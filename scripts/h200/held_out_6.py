"""The sixth held-out set's programs (fixtures/syncs/held-out-6.json): library paths no earlier set ran, harvested
after held-out-5 was scored and mended, by scripts/h200/harvest-syncs.py held-out-6. Each program runs its calls
one by one (``_each``): a call this version's API lacks is said and skipped, the others still run."""

import os
from pathlib import Path

import torch
from harvest_each import DEVICE, _each, _updated


def vision_transformers() -> None:
    from transformers import (
        CLIPConfig,
        CLIPModel,
        SwinConfig,
        SwinForImageClassification,
        ViTMAEConfig,
        ViTMAEForPreTraining,  # fmt: skip
    )

    images = torch.rand(2, 3, 64, 64, device=DEVICE)

    def mae() -> None:
        config = ViTMAEConfig(image_size=64, patch_size=16, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=128, decoder_hidden_size=32, decoder_num_hidden_layers=1,
                              decoder_num_attention_heads=2, decoder_intermediate_size=64)  # fmt: skip
        ViTMAEForPreTraining(config).to(DEVICE)(pixel_values=images).loss.backward()

    def clip() -> None:
        config = CLIPConfig(text_config={"vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 1,
                                         "num_attention_heads": 2, "intermediate_size": 64},
                            vision_config={"image_size": 64, "patch_size": 16, "hidden_size": 32,
                                           "num_hidden_layers": 1, "num_attention_heads": 2,
                                           "intermediate_size": 64}, projection_dim=16)  # fmt: skip
        ids = torch.randint(1, 300, (2, 8), device=DEVICE)
        CLIPModel(config).to(DEVICE)(input_ids=ids, pixel_values=images, return_loss=True).loss.backward()

    def swin() -> None:
        config = SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4,
                            num_labels=3)  # fmt: skip
        labels = torch.tensor([0, 2], device=DEVICE)
        SwinForImageClassification(config).to(DEVICE)(pixel_values=images, labels=labels).loss.backward()

    _each(mae, clip, swin)


def token_tasks() -> None:
    from transformers import (
        BertConfig,
        BertForQuestionAnswering,
        BertForTokenClassification,
        DistilBertConfig,  # fmt: skip
        DistilBertForMaskedLM,
    )

    ids = torch.randint(1, 300, (2, 16), device=DEVICE)
    mask = torch.ones_like(ids)
    mask[0, 12:] = 0
    bert = BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)

    def tokens() -> None:
        labels = torch.randint(0, 4, (2, 16), device=DEVICE)
        labels[0, 12:] = -100
        model = BertForTokenClassification(BertConfig(**bert.to_dict(), num_labels=4)).to(DEVICE)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()

    def answers() -> None:
        model = BertForQuestionAnswering(bert).to(DEVICE)
        starts, ends = torch.tensor([3, 30], device=DEVICE), torch.tensor([5, 40], device=DEVICE)
        model(input_ids=ids, attention_mask=mask, start_positions=starts, end_positions=ends).loss.backward()

    def masked() -> None:
        config = DistilBertConfig(vocab_size=300, dim=32, n_layers=1, n_heads=2, hidden_dim=64)
        labels = torch.full_like(ids, -100)
        labels[:, 3] = ids[:, 3]
        DistilBertForMaskedLM(config).to(DEVICE)(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()

    _each(tokens, answers, masked)


def audio_functional() -> None:
    import torchaudio.functional as F
    import torchaudio.transforms as T

    waves = torch.randn(2, 8000, device=DEVICE)
    spectrum = torch.stft(waves, 256, return_complex=True, window=torch.hann_window(256, device=DEVICE))

    def align() -> None:
        emission = torch.randn(1, 50, 10, device=DEVICE).log_softmax(-1)
        F.forced_align(emission, torch.tensor([[1, 2, 3, 4]], dtype=torch.int32, device=DEVICE), blank=0)

    def rnnt() -> None:
        logits = torch.randn(2, 10, 5, 6, device=DEVICE, requires_grad=True)
        targets = torch.randint(1, 6, (2, 4), dtype=torch.int32, device=DEVICE)
        lengths = torch.tensor([10, 8], dtype=torch.int32, device=DEVICE)
        F.rnnt_loss(logits, targets, lengths, torch.tensor([4, 3], dtype=torch.int32, device=DEVICE)).backward()

    _each(
        align,
        rnnt,
        lambda: F.detect_pitch_frequency(waves, 8000),
        lambda: F.spectral_centroid(waves, 8000, 0, torch.hann_window(256, device=DEVICE), 256, 64, 256),
        lambda: F.phase_vocoder(spectrum, 1.3, torch.linspace(0, 3.14 * 64, 129, device=DEVICE)[..., None]),
        lambda: T.MFCC(sample_rate=8000, n_mfcc=13, melkwargs={"n_mels": 32, "n_fft": 256}).to(DEVICE)(waves),
        lambda: T.PitchShift(8000, 2).to(DEVICE)(waves),
        lambda: F.loudness(waves, 8000),
        lambda: F.preemphasis(waves),
        lambda: F.add_noise(waves, torch.randn_like(waves), torch.tensor([10.0, 5.0], device=DEVICE)),
        lambda: F.speed(waves, 8000, 1.1),
    )


def graph_utils_more() -> None:
    from torch_geometric.nn import DiffGroupNorm, InstanceNorm, LayerNorm, PairNorm, global_max_pool
    from torch_geometric.nn.aggr import AttentionalAggregation, LSTMAggregation, MedianAggregation
    from torch_geometric.utils import (
        contains_isolated_nodes,
        dropout_node,
        get_laplacian,
        homophily,
        is_undirected,  # fmt: skip
        mask_feature,
        softmax,
        unbatch,
        unbatch_edge_index,
    )

    n = 40
    edges = torch.randint(0, n, (2, 120), device=DEVICE)
    x, batch = torch.randn(n, 8, device=DEVICE), torch.arange(n, device=DEVICE) // 10
    y = torch.randint(0, 3, (n,), device=DEVICE)
    _each(
        lambda: unbatch(x, batch),
        lambda: unbatch_edge_index(edges.sort(dim=1).values.clamp(max=9), torch.zeros(10, dtype=torch.long, device=DEVICE)),
        lambda: homophily(edges, y, method="edge"),
        lambda: homophily(edges, y, method="class"),
        lambda: get_laplacian(edges, normalization="sym", num_nodes=n),
        lambda: is_undirected(edges, num_nodes=n),
        lambda: contains_isolated_nodes(edges, num_nodes=n),
        lambda: dropout_node(edges, p=0.3, num_nodes=n),
        lambda: mask_feature(x, p=0.3),
        lambda: softmax(torch.randn(120, device=DEVICE), edges[1], num_nodes=n),
        lambda: PairNorm()(x, batch),
        lambda: DiffGroupNorm(8, 3).to(DEVICE)(x),
        lambda: LayerNorm(8, mode="graph").to(DEVICE)(x, batch),
        lambda: InstanceNorm(8).to(DEVICE)(x, batch),
        lambda: global_max_pool(x, batch),
        lambda: MedianAggregation()(x, batch),
        lambda: LSTMAggregation(8, 8).to(DEVICE)(x, batch),
        lambda: AttentionalAggregation(torch.nn.Linear(8, 1).to(DEVICE))(x, batch),
    )


def metrics_sixth() -> None:
    from torchmetrics.classification import (
        BinaryFairness,
        BinarySpecificityAtSensitivity,
        MulticlassCalibrationError,
        MulticlassPrecisionAtFixedRecall,  # fmt: skip
    )
    from torchmetrics.image import SpectralAngleMapper, UniversalImageQualityIndex
    from torchmetrics.regression import (
        ConcordanceCorrCoef,
        CosineSimilarity,
        KLDivergence,
        MeanAbsolutePercentageError,
        TweedieDevianceScore,  # fmt: skip
    )
    from torchmetrics.text import Perplexity

    probs, labels = torch.rand(60, device=DEVICE), torch.randint(0, 2, (60,), device=DEVICE)
    logits, classes = torch.randn(60, 4, device=DEVICE), torch.randint(0, 4, (60,), device=DEVICE)
    groups = torch.randint(0, 2, (60,), device=DEVICE)
    a, b = torch.rand(60, device=DEVICE) + 0.1, torch.rand(60, device=DEVICE) + 0.1
    images = torch.rand(2, 3, 32, 32, device=DEVICE)
    tokens = torch.randint(0, 10, (2, 8), device=DEVICE)
    tokens[0, 6:] = -100
    _each(
        lambda: _updated(BinaryFairness(num_groups=2), probs, labels, groups),
        lambda: _updated(BinarySpecificityAtSensitivity(min_sensitivity=0.5), probs, labels),
        lambda: _updated(MulticlassCalibrationError(num_classes=4), logits.softmax(-1), classes),
        lambda: _updated(MulticlassPrecisionAtFixedRecall(num_classes=4, min_recall=0.5), logits.softmax(-1), classes),
        lambda: _updated(ConcordanceCorrCoef(), a, b),
        lambda: _updated(CosineSimilarity(), a[None], b[None]),
        lambda: _updated(KLDivergence(), a[None].softmax(-1), b[None].softmax(-1)),
        lambda: _updated(MeanAbsolutePercentageError(), a, b),
        lambda: _updated(TweedieDevianceScore(power=1.5), a, b),
        lambda: _updated(SpectralAngleMapper(), images, images.flip(-1)),
        lambda: _updated(UniversalImageQualityIndex(), images, images.flip(-1)),
        lambda: _updated(Perplexity(ignore_index=-100), torch.randn(2, 8, 10, device=DEVICE), tokens),
    )


def lightning_manual_and_finetuning() -> None:
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import BackboneFinetuning, GradientAccumulationScheduler
    from torchmetrics import MetricCollection
    from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

    class Manual(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.layer = torch.nn.Linear(16, 3)
            self.metrics = MetricCollection([MulticlassAccuracy(num_classes=3), MulticlassF1Score(num_classes=3)])

        def training_step(self, batch, _index):
            optimizer = self.optimizers()
            x, y = batch
            logits = self.layer(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            optimizer.zero_grad()
            self.manual_backward(loss)
            self.clip_gradients(optimizer, gradient_clip_val=0.5, gradient_clip_algorithm="norm")
            optimizer.step()
            self.log_dict(self.metrics(logits, y), on_step=True, on_epoch=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class Tuned(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
            self.head = torch.nn.Linear(16, 3)

        def training_step(self, batch, _index):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.head(self.backbone(x)), y)
            self.log("loss", loss, on_epoch=True, reduce_fx="sum")
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(filter(lambda p: p.requires_grad, self.parameters()), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(48, 16), torch.randint(0, 3, (48,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    folder = Path(os.environ.get("OUT", "/tmp")) / "lightning-manual"
    common = {"accelerator": "gpu", "devices": 1, "logger": False, "default_root_dir": folder,
              "enable_checkpointing": False, "enable_model_summary": False, "enable_progress_bar": False}  # fmt: skip
    _each(
        lambda: pl.Trainer(max_epochs=1, **common).fit(Manual(), loader),
        lambda: pl.Trainer(max_epochs=2, callbacks=[BackboneFinetuning(unfreeze_backbone_at_epoch=1),
                                                    GradientAccumulationScheduler({0: 2, 1: 1})],
                           **common).fit(Tuned(), loader),  # fmt: skip
    )


def multi_objective() -> None:
    from botorch.acquisition.multi_objective import qLogNoisyExpectedHypervolumeImprovement
    from botorch.models import ModelListGP, SingleTaskGP
    from botorch.utils.multi_objective.box_decompositions import FastNondominatedPartitioning
    from botorch.utils.multi_objective.hypervolume import Hypervolume
    from botorch.utils.multi_objective.pareto import is_non_dominated

    x = torch.rand(12, 2, device=DEVICE, dtype=torch.double)
    y = torch.stack([x.sum(-1), (1 - x).prod(-1)], dim=-1)
    model = ModelListGP(SingleTaskGP(x, y[:, :1]), SingleTaskGP(x, y[:, 1:]))
    reference = torch.zeros(2, device=DEVICE, dtype=torch.double)
    _each(
        lambda: FastNondominatedPartitioning(ref_point=reference, Y=y).compute_hypervolume(),
        lambda: Hypervolume(ref_point=reference).compute(y[is_non_dominated(y)]),
        lambda: qLogNoisyExpectedHypervolumeImprovement(model, ref_point=reference, X_baseline=x)(x[:4, None]),
    )


def ode_methods() -> None:
    from torchdiffeq import odeint, odeint_event

    class Decay(torch.nn.Module):
        def forward(self, t, y):
            return -0.5 * y + torch.sin(t)

    y0 = torch.ones(4, device=DEVICE)
    t = torch.linspace(0, 1, 5, device=DEVICE)
    _each(
        lambda: odeint(Decay(), y0, t, method="rk4", options={"step_size": 0.1}),
        lambda: odeint(Decay(), y0, t, method="adaptive_heun"),
        lambda: odeint(Decay(), y0, t, method="bosh3"),
        lambda: odeint(Decay(), y0, t, method="implicit_adams", options={"step_size": 0.1}),
        lambda: odeint_event(Decay(), y0, torch.tensor(0.0, device=DEVICE), event_fn=lambda t, y: y.sum() - 3.8,
                             method="dopri5"),  # fmt: skip
    )


HELD_OUT_6 = [vision_transformers, token_tasks, audio_functional, graph_utils_more, metrics_sixth,
              lightning_manual_and_finetuning, multi_objective, ode_methods]  # fmt: skip
