"""The seventh held-out set's programs (fixtures/syncs/held-out-7.json): library paths no earlier set ran, harvested
after held-out-6's misses were tuned on, by scripts/h200/harvest-syncs.py held-out-7. Each program runs its calls
one by one (``_each``): a call this version's API lacks is said and skipped, the others still run."""

import os
from pathlib import Path

import torch
from harvest_each import DEVICE, _each, _updated


def timm_optimizers() -> None:
    import timm
    from timm.optim import create_optimizer_v2

    model = timm.create_model("resnet10t", num_classes=5).to(DEVICE)
    x, y = torch.rand(4, 3, 32, 32, device=DEVICE), torch.randint(0, 5, (4,), device=DEVICE)

    def steps(name: str) -> None:
        optimizer = create_optimizer_v2(model, name, lr=1e-3, weight_decay=0.01)
        for _ in range(2):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward(create_graph=name == "adahessian")
            optimizer.step()

    names = ["lamb", "lars", "adafactor", "adabelief", "radam", "nvnovograd", "sgdp", "adamp", "lion", "madgrad",
             "adopt", "mars", "laprop", "kron", "adafactorbv", "adan", "nadamw", "rmsproptf", "adahessian"]  # fmt: skip
    _each(*[lambda name=name: steps(name) for name in names])


def vision_models_more() -> None:
    from torchvision.models import maxvit_t, swin_v2_t
    from torchvision.models.detection import fcos_resnet50_fpn, maskrcnn_resnet50_fpn
    from torchvision.models.optical_flow import raft_small

    images = [torch.rand(3, 128, 128, device=DEVICE) for _ in range(2)]
    boxes = torch.tensor([[10.0, 20.0, 60.0, 90.0], [30.0, 30.0, 100.0, 110.0]], device=DEVICE)
    masks = torch.zeros(2, 128, 128, dtype=torch.uint8, device=DEVICE)
    masks[0, 20:90, 10:60] = 1
    masks[1, 30:110, 30:100] = 1
    targets = [{"boxes": boxes, "labels": torch.tensor([1, 2], device=DEVICE), "masks": masks} for _ in images]

    def detect(build) -> None:
        model = build(weights=None, weights_backbone=None, num_classes=4, min_size=128, max_size=128).to(DEVICE)
        sum(model(images, targets).values()).backward()
        model.eval()
        with torch.no_grad():
            model(images)

    def flow() -> None:
        model = raft_small(weights=None).to(DEVICE).eval()
        with torch.no_grad():
            model(torch.rand(1, 3, 128, 128, device=DEVICE), torch.rand(1, 3, 128, 128, device=DEVICE), num_flow_updates=3)

    _each(
        lambda: detect(fcos_resnet50_fpn),
        lambda: detect(maskrcnn_resnet50_fpn),
        flow,
        lambda: swin_v2_t(num_classes=3).to(DEVICE)(torch.rand(2, 3, 64, 64, device=DEVICE)).sum().backward(),
        lambda: maxvit_t(num_classes=3).to(DEVICE)(torch.rand(2, 3, 224, 224, device=DEVICE)).sum().backward(),
    )


def box_ops_more() -> None:
    from torchvision import ops
    from torchvision.utils import draw_keypoints, draw_segmentation_masks

    boxes = torch.tensor([[10.0, 20.0, 60.0, 90.0], [12.0, 22.0, 58.0, 95.0], [70.0, 10.0, 120.0, 40.0]], device=DEVICE)
    other = boxes + torch.rand_like(boxes) * 5
    features = torch.rand(2, 8, 32, 32, device=DEVICE)
    picked = torch.tensor([[0, 1.0, 1.0, 20.0, 20.0], [1, 5.0, 5.0, 30.0, 25.0]], device=DEVICE)
    masks = torch.rand(3, 64, 64, device=DEVICE) > 0.7
    image = (torch.rand(3, 64, 64, device=DEVICE) * 255).to(torch.uint8)
    offset = torch.zeros(2, 18, 32, 32, device=DEVICE)
    _each(
        lambda: ops.masks_to_boxes(masks),
        lambda: ops.box_convert(boxes, "xyxy", "cxcywh"),
        lambda: ops.clip_boxes_to_image(boxes, (64, 64)),
        lambda: ops.remove_small_boxes(boxes, 40.0),
        lambda: ops.generalized_box_iou_loss(boxes, other, reduction="mean"),
        lambda: ops.complete_box_iou_loss(boxes, other, reduction="mean"),
        lambda: ops.distance_box_iou_loss(boxes, other, reduction="mean"),
        lambda: ops.sigmoid_focal_loss(torch.randn(3, 4, device=DEVICE), torch.rand(3, 4, device=DEVICE), reduction="sum"),
        lambda: ops.drop_block2d(features, 0.2, 3),
        lambda: ops.stochastic_depth(features, 0.2, "row"),
        lambda: ops.roi_pool(features, picked, 4),
        lambda: ops.ps_roi_align(torch.rand(2, 16, 32, 32, device=DEVICE), picked, 2),
        lambda: ops.deform_conv2d(features, offset, torch.rand(4, 8, 3, 3, device=DEVICE), padding=1),
        lambda: ops.FeaturePyramidNetwork([8, 16], 8).to(DEVICE)({"a": features, "b": torch.rand(2, 16, 16, 16, device=DEVICE)}),
        lambda: draw_segmentation_masks(image, masks, alpha=0.5),
        lambda: draw_keypoints(image, torch.rand(1, 5, 2, device=DEVICE) * 60, connectivity=[(0, 1), (1, 2)]),
    )


def accelerate_more() -> None:
    from accelerate import Accelerator

    accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=2)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    optimizer = torch.optim.AdamW(model.parameters())
    data = torch.utils.data.TensorDataset(torch.randn(32, 16), torch.randint(0, 3, (32,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    def train() -> None:
        for x, y in loader:
            with accelerator.accumulate(model):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
            accelerator.gather_for_metrics((model(x).argmax(-1), y))

    _each(
        train,
        lambda: accelerator.pad_across_processes(torch.ones(3, 5, device=DEVICE), dim=1),
        lambda: accelerator.reduce(torch.ones(3, device=DEVICE), reduction="mean"),
        lambda: accelerator.gather(torch.ones(3, device=DEVICE)),
    )


def metrics_seventh() -> None:
    from torchmetrics import classification as C
    from torchmetrics import regression as R
    from torchmetrics import retrieval as T
    from torchmetrics import wrappers as W
    from torchmetrics.audio import PermutationInvariantTraining, ScaleInvariantSignalDistortionRatio
    from torchmetrics.functional.audio import scale_invariant_signal_distortion_ratio
    from torchmetrics.segmentation import GeneralizedDiceScore, MeanIoU

    a, b = torch.randn(50, device=DEVICE), torch.randn(50, device=DEVICE)
    probs, labels = torch.rand(50, device=DEVICE), torch.randint(0, 2, (50,), device=DEVICE)
    logits, classes = torch.randn(50, 4, device=DEVICE).softmax(-1), torch.randint(0, 4, (50,), device=DEVICE)
    multi, multi_labels = torch.rand(50, 3, device=DEVICE), torch.randint(0, 2, (50, 3), device=DEVICE)
    queries = torch.randint(0, 5, (50,), device=DEVICE)
    segments, truth = torch.randint(0, 3, (2, 16, 16), device=DEVICE), torch.randint(0, 3, (2, 16, 16), device=DEVICE)
    waves = torch.randn(2, 2, 400, device=DEVICE)

    def tracker() -> None:
        tracked = W.MetricTracker(C.MulticlassAccuracy(num_classes=4)).to(DEVICE)
        for _ in range(3):
            tracked.increment()
            tracked.update(logits, classes)
        tracked.best_metric(return_step=True)

    _each(
        lambda: _updated(R.KendallRankCorrCoef(), a, b),
        lambda: _updated(R.R2Score(), a, b),
        lambda: _updated(R.ExplainedVariance(), a, b),
        lambda: _updated(R.CriticalSuccessIndex(0.5), probs, labels.float()),
        lambda: _updated(R.LogCoshError(), a, b),
        lambda: _updated(R.MinkowskiDistance(p=3), a, b),
        lambda: _updated(R.RelativeSquaredError(), a, b),
        lambda: _updated(C.BinaryCohenKappa(), probs, labels),
        lambda: _updated(C.MulticlassMatthewsCorrCoef(num_classes=4), logits, classes),
        lambda: _updated(C.MultilabelExactMatch(num_labels=3), multi, multi_labels),
        lambda: _updated(C.MultilabelRankingAveragePrecision(num_labels=3), multi, multi_labels),
        lambda: _updated(C.MultilabelCoverageError(num_labels=3), multi, multi_labels),
        lambda: _updated(C.MulticlassAUROC(num_classes=4, thresholds=None), logits, classes),
        lambda: _updated(C.BinaryAveragePrecision(thresholds=None), probs, labels),
        lambda: _updated(C.BinaryHingeLoss(), probs, labels),
        lambda: _updated(C.BinaryEER(), probs, labels),
        lambda: _updated(T.RetrievalMAP(), probs, labels, queries),
        lambda: _updated(T.RetrievalNormalizedDCG(top_k=3), probs, labels, queries),
        lambda: _updated(T.RetrievalRPrecision(), probs, labels, queries),
        lambda: _updated(T.RetrievalHitRate(top_k=2), probs, labels, queries),
        lambda: _updated(T.RetrievalFallOut(), probs, labels, queries),
        lambda: _updated(MeanIoU(num_classes=3, input_format="index"), segments, truth),
        lambda: _updated(GeneralizedDiceScore(num_classes=3, input_format="index"), segments, truth),
        lambda: _updated(ScaleInvariantSignalDistortionRatio(), waves[:, 0], waves[:, 1]),
        lambda: _updated(PermutationInvariantTraining(scale_invariant_signal_distortion_ratio, mode="speaker-wise",
                                                 eval_func="max"), waves, waves.flip(1)),  # fmt: skip
        tracker,
        lambda: _updated(W.Running(R.MeanSquaredError(), window=2), a, b),
        lambda: _updated(W.ClasswiseWrapper(C.MulticlassAccuracy(num_classes=4, average=None)), logits, classes),
        lambda: _updated(W.MultioutputWrapper(R.R2Score(), num_outputs=2), torch.randn(50, 2, device=DEVICE),
                    torch.randn(50, 2, device=DEVICE)),  # fmt: skip
    )


def graph_models() -> None:
    from torch_geometric.data import Data
    from torch_geometric.nn import (
        GAE,
        ChebConv,
        EdgePooling,
        GENConv,
        GraphUNet,
        HypergraphConv,
        SAGPooling,
        TransformerConv,  # fmt: skip
        global_mean_pool,
    )
    from torch_geometric.nn.aggr import GraphMultisetTransformer, SetTransformerAggregation
    from torch_geometric.nn.models import GIN, CorrectAndSmooth, LabelPropagation
    from torch_geometric.transforms import AddRandomWalkPE, LocalDegreeProfile, RandomLinkSplit, RandomNodeSplit

    n = 40
    x = torch.randn(n, 8, device=DEVICE)
    edges = torch.randint(0, n, (2, 160), device=DEVICE)
    edges = edges[:, edges[0] != edges[1]]
    batch = torch.arange(n, device=DEVICE) // 10
    y = torch.randint(0, 3, (n,), device=DEVICE)
    train = torch.rand(n, device=DEVICE) > 0.5

    def autoencoder() -> None:
        model = GAE(GIN(8, 16, 2)).to(DEVICE)
        z = model.encode(x, edges)
        model.recon_loss(z, edges).backward()

    _each(
        lambda: GraphUNet(8, 16, 4, depth=2).to(DEVICE)(x, edges, batch),
        lambda: SAGPooling(8).to(DEVICE)(x, edges, batch=batch),
        lambda: EdgePooling(8).to(DEVICE)(x, edges, batch),
        lambda: ChebConv(8, 8, K=3).to(DEVICE)(x, edges),
        lambda: GENConv(8, 8, aggr="softmax", learn_t=True).to(DEVICE)(x, edges),
        lambda: TransformerConv(8, 8, heads=2).to(DEVICE)(x, edges),
        lambda: HypergraphConv(8, 8).to(DEVICE)(x, torch.stack([torch.arange(n, device=DEVICE), batch])),
        lambda: GraphMultisetTransformer(8, k=4).to(DEVICE)(x, batch),
        lambda: SetTransformerAggregation(8).to(DEVICE)(x, batch),
        lambda: global_mean_pool(x, batch),
        autoencoder,
        lambda: LabelPropagation(num_layers=3, alpha=0.9)(y, edges, mask=train),
        lambda: CorrectAndSmooth(2, 0.8, 2, 0.8).to(DEVICE).correct(torch.rand(n, 3, device=DEVICE).softmax(-1),
                                                                   y[train], train, edges),  # fmt: skip
        lambda: LocalDegreeProfile()(Data(x=x, edge_index=edges, num_nodes=n)),
        lambda: AddRandomWalkPE(walk_length=4)(Data(x=x, edge_index=edges, num_nodes=n)),
        lambda: RandomNodeSplit(num_val=5, num_test=5)(Data(x=x, y=y, edge_index=edges, num_nodes=n)),
        lambda: RandomLinkSplit(num_val=0.1, num_test=0.1)(Data(x=x, edge_index=edges, num_nodes=n)),
    )


def audio_models_more() -> None:
    import torchaudio
    import torchaudio.transforms as T

    waves = torch.randn(2, 4000, device=DEVICE)
    lengths = torch.tensor([4000, 3000], device=DEVICE)
    spectrum = torch.stft(waves, 256, return_complex=True, window=torch.hann_window(256, device=DEVICE))

    def tacotron() -> None:
        model = torchaudio.models.Tacotron2(n_symbol=40, n_mels=20, encoder_embedding_dim=64, encoder_n_convolution=1,
                                            decoder_rnn_dim=64, attention_rnn_dim=64, attention_hidden_dim=32,
                                            prenet_dim=32, postnet_n_convolution=1, postnet_embedding_dim=32,
                                            decoder_max_step=20).to(DEVICE).eval()  # fmt: skip
        tokens = torch.randint(1, 40, (2, 12), device=DEVICE)
        with torch.no_grad():
            model.infer(tokens, torch.tensor([12, 9], device=DEVICE))

    def wav2vec2() -> None:
        model = torchaudio.models.wav2vec2_model(
            extractor_mode="group_norm", extractor_conv_layer_config=[(32, 10, 5), (32, 3, 2)], extractor_conv_bias=False,
            encoder_embed_dim=64, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=16, encoder_pos_conv_groups=4,
            encoder_num_layers=2, encoder_num_heads=2, encoder_attention_dropout=0.0, encoder_ff_interm_features=128,
            encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.0,
            aux_num_out=10).to(DEVICE)  # fmt: skip
        model(waves, lengths)[0].sum().backward()

    _each(
        tacotron,
        wav2vec2,
        lambda: torchaudio.models.ConvTasNet(num_sources=2, enc_num_feats=32, msk_num_feats=16, msk_num_hidden_feats=32,
                                             msk_num_layers=2, msk_num_stacks=1).to(DEVICE)(waves[:, None]),  # fmt: skip
        lambda: torchaudio.models.Emformer(32, 2, 64, 2, segment_length=4, right_context_length=1).to(DEVICE)(
            torch.randn(2, 21, 32, device=DEVICE), torch.tensor([21, 15], device=DEVICE)),  # fmt: skip
        lambda: torchaudio.models.WaveRNN([5, 5], 16, 20, 64, 16, 20, n_freq=20, n_output=16).to(DEVICE).infer(
            torch.randn(1, 20, 6, device=DEVICE)),  # fmt: skip
        lambda: T.Resample(4000, 3000).to(DEVICE)(waves),
        lambda: T.Vad(4000)(waves[0]),
        lambda: T.SlidingWindowCmn(cmn_window=20)(torch.randn(100, 13, device=DEVICE)),
        lambda: T.GriffinLim(n_fft=256, n_iter=4).to(DEVICE)(spectrum.abs() ** 2),
        lambda: T.TimeStretch(n_freq=129).to(DEVICE)(spectrum, 1.2),
        lambda: T.Fade(fade_in_len=400, fade_out_len=400)(waves),
        lambda: T.ComputeDeltas()(torch.randn(2, 13, 50, device=DEVICE)),
        lambda: T.FrequencyMasking(8, iid_masks=True)(torch.randn(2, 1, 64, 50, device=DEVICE)),
        lambda: T.PSD()(torch.stft(torch.randn(4, 4000, device=DEVICE), 256, return_complex=True,
                                   window=torch.hann_window(256, device=DEVICE))),  # fmt: skip
    )


def hf_models_more() -> None:
    from transformers import (
        DebertaV2Config,
        DebertaV2ForSequenceClassification,
        LongformerConfig,
        LongformerForMaskedLM,  # fmt: skip
        MambaConfig,
        MambaForCausalLM,
        Qwen2MoeConfig,
        Qwen2MoeForCausalLM,
    )

    ids = torch.randint(3, 300, (2, 32), device=DEVICE)

    def longformer() -> None:
        config = LongformerConfig(vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, attention_window=[8], max_position_embeddings=80)  # fmt: skip
        model = LongformerForMaskedLM(config).to(DEVICE)
        glob = torch.zeros_like(ids)
        glob[:, 0] = 1
        model(input_ids=ids, global_attention_mask=glob, labels=ids).loss.backward()

    def deberta() -> None:
        config = DebertaV2Config(vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64, relative_attention=True, position_buckets=16,
                                 pos_att_type=["p2c", "c2p"], num_labels=3)  # fmt: skip
        labels = torch.tensor([0, 2], device=DEVICE)
        DebertaV2ForSequenceClassification(config).to(DEVICE)(input_ids=ids, labels=labels).loss.backward()

    def mamba() -> None:
        config = MambaConfig(vocab_size=300, hidden_size=32, state_size=8, num_hidden_layers=2)
        model = MambaForCausalLM(config).to(DEVICE)
        model(input_ids=ids, labels=ids).loss.backward()
        model.eval().generate(ids[:, :8], max_new_tokens=4, do_sample=False)

    def qwen_moe() -> None:
        config = Qwen2MoeConfig(vocab_size=300, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
                                shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                                num_key_value_heads=1, num_experts=4, num_experts_per_tok=2,
                                output_router_logits=True)  # fmt: skip
        Qwen2MoeForCausalLM(config).to(DEVICE)(input_ids=ids, labels=ids).loss.backward()

    _each(longformer, deberta, mamba, qwen_moe)


def gp_models_more() -> None:
    import gpytorch

    x = torch.rand(40, 1, device=DEVICE)
    y = torch.sin(6 * x[:, 0]) + 0.1 * torch.randn(40, device=DEVICE)

    class Sparse(gpytorch.models.ExactGP):
        def __init__(self, likelihood) -> None:
            super().__init__(x, y, likelihood)
            self.mean = gpytorch.means.ConstantMean()
            base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())
            self.covar = gpytorch.kernels.InducingPointKernel(base, inducing_points=x[:8].clone(), likelihood=likelihood)

        def forward(self, z):
            return gpytorch.distributions.MultivariateNormal(self.mean(z), self.covar(z))

    class Grid(gpytorch.models.ExactGP):
        def __init__(self, likelihood) -> None:
            super().__init__(x, y, likelihood)
            self.mean = gpytorch.means.ConstantMean()
            self.covar = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.GridInterpolationKernel(gpytorch.kernels.RBFKernel(), grid_size=32, num_dims=1))

        def forward(self, z):
            return gpytorch.distributions.MultivariateNormal(self.mean(z), self.covar(z))

    class Mixture(gpytorch.models.ExactGP):
        def __init__(self, likelihood) -> None:
            super().__init__(x, y, likelihood)
            self.mean = gpytorch.means.ConstantMean()
            self.covar = gpytorch.kernels.SpectralMixtureKernel(num_mixtures=3)
            self.covar.initialize_from_data(x, y)

        def forward(self, z):
            return gpytorch.distributions.MultivariateNormal(self.mean(z), self.covar(z))

    def fit(build) -> None:
        likelihood = gpytorch.likelihoods.GaussianLikelihood().to(DEVICE)
        model = build(likelihood).to(DEVICE)
        model.train()
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
        for _ in range(2):
            optimizer.zero_grad()
            (-mll(model(x), y)).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad(), gpytorch.settings.fast_pred_var():
            likelihood(model(torch.rand(10, 1, device=DEVICE))).confidence_region()
        model.get_fantasy_model(torch.rand(3, 1, device=DEVICE), torch.rand(3, device=DEVICE))

    _each(lambda: fit(Sparse), lambda: fit(Grid), lambda: fit(Mixture))


def lightning_loops_more() -> None:
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import BasePredictionWriter, RichModelSummary, RichProgressBar

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(16, 3)

        def training_step(self, batch, _index):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.log_dict({"train_loss": loss, "train_max": self.layer.weight.abs().max()}, prog_bar=True)
            return loss

        def validation_step(self, batch, _index):
            x, y = batch
            self.log("val_acc", (self.layer(x).argmax(-1) == y).float().mean(), sync_dist=True, prog_bar=True)

        def test_step(self, batch, _index):
            x, y = batch
            self.log("test_loss", torch.nn.functional.cross_entropy(self.layer(x), y))

        def predict_step(self, batch, _index):
            return self.layer(batch[0]).softmax(-1)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class Writer(BasePredictionWriter):
        def write_on_batch_end(self, trainer, module, prediction, indices, batch, batch_index, loader_index):
            self.last = prediction

    data = torch.utils.data.TensorDataset(torch.randn(48, 16), torch.randint(0, 3, (48,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    folder = Path(os.environ.get("OUT", "/tmp")) / "lightning-loops"
    trainer = pl.Trainer(max_epochs=1, accelerator="gpu", devices=1, logger=False, default_root_dir=folder,
                         enable_checkpointing=False, val_check_interval=0.5, accumulate_grad_batches=2,
                         callbacks=[RichProgressBar(), RichModelSummary(), Writer("batch")])  # fmt: skip
    module = Module()
    _each(
        lambda: trainer.fit(module, loader, loader),
        lambda: trainer.test(module, loader, verbose=False),
        lambda: trainer.predict(module, loader, return_predictions=False),
    )


HELD_OUT_7 = [timm_optimizers, vision_models_more, box_ops_more, accelerate_more, metrics_seventh, graph_models,
              audio_models_more, hf_models_more, gp_models_more, lightning_loops_more]  # fmt: skip
