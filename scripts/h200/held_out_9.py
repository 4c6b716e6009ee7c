"""The ninth held-out set's programs (fixtures/syncs/held-out-9.json): library paths no earlier set ran, harvested
after held-out-8 was scored and its misses tuned on, by scripts/h200/harvest-syncs.py held-out-9. Each program runs
its calls one by one (``_each``): a call this version's API lacks is said and skipped, the others still run."""

import os
from pathlib import Path

import torch
from harvest_each import DEVICE, _each, _updated


def hf_models_ninth() -> None:
    import transformers as T

    ids = torch.randint(3, 300, (2, 32), device=DEVICE)
    pixels = torch.rand(2, 3, 64, 64, device=DEVICE)

    def mask2former() -> None:
        backbone = T.SwinConfig(image_size=64, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1],
                                out_features=["stage1", "stage2", "stage3", "stage4"])  # fmt: skip
        config = T.Mask2FormerConfig(backbone_config=backbone, hidden_dim=32, mask_feature_size=32, feature_size=32,
                                     num_queries=10, encoder_layers=1, decoder_layers=2, num_attention_heads=2,
                                     dim_feedforward=64, encoder_feedforward_dim=64, num_labels=3,
                                     train_num_points=64)  # fmt: skip
        masks = [(torch.rand(2, 64, 64, device=DEVICE) > 0.5).float() for _ in range(2)]
        labels = [torch.tensor([0, 2], device=DEVICE) for _ in range(2)]
        T.Mask2FormerForUniversalSegmentation(config).to(DEVICE)(pixel_values=pixels, mask_labels=masks,
                                                                 class_labels=labels).loss.backward()  # fmt: skip

    def rt_detr() -> None:
        config = T.RTDetrConfig(num_queries=20, num_labels=3, d_model=64, encoder_hidden_dim=64, decoder_layers=1,
                                encoder_layers=1, num_denoising=10)  # fmt: skip
        labels = [{"class_labels": torch.tensor([0, 2], device=DEVICE),
                   "boxes": torch.tensor([[0.5, 0.5, 0.2, 0.3], [0.3, 0.6, 0.2, 0.2]], device=DEVICE)}
                  for _ in range(2)]  # fmt: skip
        T.RTDetrForObjectDetection(config).to(DEVICE)(pixel_values=pixels, labels=labels).loss.backward()

    def reformer() -> None:
        config = T.ReformerConfig(vocab_size=300, hidden_size=32, num_attention_heads=2, attention_head_size=16,
                                  feed_forward_size=64, axial_pos_embds=False, attn_layers=["lsh", "local"],
                                  lsh_attn_chunk_length=8, local_attn_chunk_length=8, num_buckets=4,
                                  is_decoder=True, max_position_embeddings=64)  # fmt: skip
        T.ReformerModelWithLMHead(config).to(DEVICE)(input_ids=ids, labels=ids).loss.backward()

    def led() -> None:
        config = T.LEDConfig(vocab_size=300, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                             decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, attention_window=[8],
                             max_encoder_position_embeddings=64, max_decoder_position_embeddings=64)  # fmt: skip
        mask = torch.zeros_like(ids)
        mask[:, 0] = 1
        T.LEDForConditionalGeneration(config).to(DEVICE)(input_ids=ids, global_attention_mask=mask,
                                                         labels=ids[:, :8]).loss.backward()  # fmt: skip

    def small(config_class, model_class, **more) -> None:
        config = config_class(vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                              intermediate_size=64, max_position_embeddings=64, **more)  # fmt: skip
        model_class(config).to(DEVICE)(input_ids=ids, labels=ids).loss.backward()

    _each(
        mask2former,
        rt_detr,
        reformer,
        led,
        lambda: small(T.MPNetConfig, T.MPNetForMaskedLM),
        lambda: small(T.RoFormerConfig, T.RoFormerForMaskedLM),
        lambda: small(T.ErnieConfig, T.ErnieForMaskedLM),
        lambda: small(T.NystromformerConfig, T.NystromformerForMaskedLM, num_landmarks=8, segment_means_seq_len=32),
        lambda: small(T.YosoConfig, T.YosoForMaskedLM, use_expectation=True),
    )


def generation_ninth() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=300, n_positions=64))
    model = model.to(DEVICE).eval()
    ids = torch.randint(3, 300, (2, 6), device=DEVICE)
    mask = torch.ones_like(ids)
    common = {"attention_mask": mask, "max_new_tokens": 6, "pad_token_id": 0}

    def scored() -> None:
        out = model.generate(ids, output_scores=True, return_dict_in_generate=True, num_beams=2, **common)
        model.compute_transition_scores(out.sequences, out.scores, out.beam_indices, normalize_logits=True)

    _each(
        lambda: model.generate(ids, sequence_bias={(5,): -10.0, (7, 8): 2.0}, **common),
        lambda: model.generate(ids, num_beams=3, num_return_sequences=2, length_penalty=0.5, early_stopping=True,
                               **common),  # fmt: skip
        lambda: model.generate(ids, do_sample=True, min_p=0.1, temperature=0.7, **common),
        lambda: model.generate(ids, renormalize_logits=True, suppress_tokens=[1, 2], begin_suppress_tokens=[3],
                               **common),  # fmt: skip
        lambda: model.generate(ids, exponential_decay_length_penalty=(2, 1.5), eos_token_id=4, **common),
        lambda: model.generate(ids, do_sample=True, top_p=0.8, top_k=0, num_return_sequences=3, **common),
        lambda: model.generate(ids, forced_eos_token_id=4, min_length=8, eos_token_id=4, **common),
        scored,
    )


def metrics_ninth() -> None:
    from torchmetrics import classification as C
    from torchmetrics import clustering as K
    from torchmetrics import nominal as N
    from torchmetrics import regression as R
    from torchmetrics import segmentation as S
    from torchmetrics import wrappers as W
    from torchmetrics.detection import PanopticQuality

    data, clusters = torch.randn(60, 4, device=DEVICE), torch.randint(0, 3, (60,), device=DEVICE)
    a, b = torch.randint(0, 3, (60,), device=DEVICE), torch.randint(0, 3, (60,), device=DEVICE)
    probs, labels = torch.rand(60, device=DEVICE), torch.randint(0, 2, (60,), device=DEVICE)
    ratings = torch.randint(0, 4, (20, 3), device=DEVICE)
    seg = torch.randint(0, 2, (2, 3, 32, 32), device=DEVICE).bool()
    panoptic = torch.stack([torch.randint(0, 3, (2, 16, 16)), torch.randint(0, 2, (2, 16, 16))], -1).to(DEVICE)
    _each(
        lambda: _updated(K.DaviesBouldinScore(), data, clusters),
        lambda: _updated(K.CalinskiHarabaszScore(), data, clusters),
        lambda: _updated(K.DunnIndex(), data, clusters),
        lambda: _updated(K.HomogeneityScore(), a, b),
        lambda: _updated(K.FowlkesMallowsIndex(), a, b),
        lambda: _updated(N.TheilsU(num_classes=3), a, b),
        lambda: _updated(N.TschuprowsT(num_classes=3), a, b),
        lambda: _updated(N.FleissKappa(mode="counts"), ratings),
        lambda: _updated(S.HausdorffDistance(num_classes=3), seg, seg.roll(1, -1)),
        lambda: _updated(PanopticQuality(things={0, 1}, stuffs={2}), panoptic, panoptic.roll(1, 1)),
        lambda: _updated(C.BinaryEER(), probs, labels),
        lambda: _updated(C.BinarySensitivityAtSpecificity(min_specificity=0.5), probs, labels),
        lambda: _updated(C.BinaryNegativePredictiveValue(), probs, labels),
        lambda: _updated(R.KLDivergence(), torch.rand(8, 5, device=DEVICE).softmax(-1),
                         torch.rand(8, 5, device=DEVICE).softmax(-1)),  # fmt: skip
        lambda: _updated(R.CriticalSuccessIndex(0.5), probs, labels.float()),
        lambda: _updated(W.MultitaskWrapper({"a": C.BinaryAccuracy(), "b": R.MeanSquaredError()}),
                         {"a": probs, "b": probs}, {"a": labels, "b": labels.float()}),  # fmt: skip
        lambda: _updated(W.MultioutputWrapper(R.R2Score(), num_outputs=2), torch.rand(20, 2, device=DEVICE),
                         torch.rand(20, 2, device=DEVICE)),  # fmt: skip
    )


def graph_ninth() -> None:
    from torch_geometric import utils as U
    from torch_geometric.nn import aggr
    from torch_geometric.nn import conv as G
    from torch_geometric.nn.models import VGAE, AttentiveFP, LightGCN

    n = 40
    x = torch.randn(n, 8, device=DEVICE)
    edges = torch.randint(0, n, (2, 160), device=DEVICE)
    attr = torch.randn(160, 4, device=DEVICE)
    batch = torch.arange(n, device=DEVICE) // 10

    def vgae() -> None:
        class Encoder(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.mu, self.logstd = G.GCNConv(8, 4), G.GCNConv(8, 4)

            def forward(self, x, edges):
                return self.mu(x, edges), self.logstd(x, edges)

        model = VGAE(Encoder()).to(DEVICE)
        z = model.encode(x, edges)
        (model.recon_loss(z, edges) + model.kl_loss()).backward()

    _each(
        lambda: AttentiveFP(8, 16, 2, edge_dim=4, num_layers=2, num_timesteps=2).to(DEVICE)(x, edges, attr, batch),
        lambda: aggr.Set2Set(8, processing_steps=2).to(DEVICE)(x, batch),
        lambda: aggr.GraphMultisetTransformer(8, k=4, heads=2).to(DEVICE)(x, batch),
        lambda: aggr.SetTransformerAggregation(8, heads=2).to(DEVICE)(x, batch),
        lambda: aggr.EquilibriumAggregation(8, 8, num_layers=[8]).to(DEVICE)(x, batch),
        lambda: aggr.LCMAggregation(8, 8).to(DEVICE)(x, batch),
        lambda: LightGCN(n, 8, 2).to(DEVICE).recommendation_loss(torch.rand(20, device=DEVICE),
                                                                torch.rand(20, device=DEVICE)),  # fmt: skip
        vgae,
        lambda: G.SuperGATConv(8, 8, heads=2).to(DEVICE)(x, edges),
        lambda: G.FiLMConv(8, 8).to(DEVICE)(x, edges),
        lambda: G.EGConv(8, 8).to(DEVICE)(x, edges),
        lambda: G.MixHopConv(8, 8).to(DEVICE)(x, edges),
        lambda: G.DirGNNConv(G.GCNConv(8, 8)).to(DEVICE)(x, edges),
        lambda: G.ClusterGCNConv(8, 8).to(DEVICE)(x, edges),
        lambda: G.LEConv(8, 8).to(DEVICE)(x, edges),
        lambda: U.add_random_edge(edges, p=0.2, num_nodes=n),
        lambda: U.mask_feature(x, p=0.3, mode="row"),
        lambda: U.homophily(edges, batch, method="edge_insensitive"),
        lambda: U.assortativity(edges),
        lambda: U.to_nested_tensor(x, batch),
        lambda: U.unbatch_edge_index(edges.sort(dim=1).values, batch),
        lambda: U.group_argsort(x[:, 0], batch),
    )


def vision_ninth() -> None:
    from torchvision import ops, tv_tensors
    from torchvision.models import segmentation, video
    from torchvision.transforms import v2

    image = torch.randint(0, 256, (3, 64, 64), dtype=torch.uint8, device=DEVICE)
    boxes = tv_tensors.BoundingBoxes(torch.tensor([[5, 5, 30, 40], [20, 10, 21, 11]], device=DEVICE),
                                     format="XYXY", canvas_size=(64, 64))  # fmt: skip
    features = torch.rand(2, 8, 16, 16, device=DEVICE)
    offsets = torch.zeros(2, 18, 16, 16, device=DEVICE)

    def trained(model, x) -> None:
        out = model.to(DEVICE)(x)
        (out["out"] if isinstance(out, dict) else out).sum().backward()

    _each(
        lambda: v2.SanitizeBoundingBoxes(min_size=2)({"image": image, "boxes": boxes, "labels": torch.tensor([1, 2], device=DEVICE)}),
        lambda: v2.RandomPerspective(p=1.0)(image, boxes),
        lambda: v2.RandomRotation(30, expand=True)(image, boxes),
        lambda: v2.RandomAffine(20, translate=(0.1, 0.1))(image, boxes),
        lambda: v2.RandomResizedCrop(32)(image, boxes),
        lambda: v2.ClampBoundingBoxes()(boxes),
        lambda: v2.ConvertBoundingBoxFormat("CXCYWH")(boxes),
        lambda: v2.ColorJitter(0.4, 0.4, 0.4, 0.1)(image),
        lambda: ops.DeformConv2d(8, 8, 3, padding=1).to(DEVICE)(features, offsets),
        lambda: ops.DropBlock2d(0.3, 3)(features),
        lambda: ops.StochasticDepth(0.5, "row")(features),
        lambda: ops.MultiScaleRoIAlign(["a"], 4, 2)({"a": features}, [boxes.float(), boxes.float()], [(64, 64)] * 2),
        lambda: ops.FeaturePyramidNetwork([8, 8], 8).to(DEVICE)({"a": features, "b": features[..., ::2, ::2]}),
        lambda: trained(segmentation.lraspp_mobilenet_v3_large(num_classes=3, weights_backbone=None), torch.rand(2, 3, 64, 64, device=DEVICE)),
        lambda: trained(segmentation.deeplabv3_mobilenet_v3_large(num_classes=3, weights_backbone=None), torch.rand(2, 3, 64, 64, device=DEVICE)),
        lambda: trained(video.r3d_18(num_classes=3), torch.rand(1, 3, 4, 32, 32, device=DEVICE)),
    )


def timm_models_ninth() -> None:
    import timm

    x, y = torch.rand(2, 3, 64, 64, device=DEVICE), torch.randint(0, 5, (2,), device=DEVICE)

    def train(name: str, **kwargs) -> None:
        model = timm.create_model(name, num_classes=5, pretrained=False, **kwargs).to(DEVICE)
        torch.nn.functional.cross_entropy(model(x), y).backward()

    names = {"maxvit_tiny_rw_224": {"img_size": 64}, "coatnet_nano_rw_224": {"img_size": 64},
             "swin_tiny_patch4_window7_224": {"img_size": 56}, "nfnet_f0": {}, "res2net50_14w_8s": {},
             "xcit_nano_12_p16_224": {"img_size": 64}, "crossvit_tiny_240": {"img_size": 240}, "pit_ti_224": {},
             "cait_xxs24_224": {"img_size": 64}, "volo_d1_224": {"img_size": 64}, "focalnet_tiny_srf": {},
             "fastvit_t8": {}, "repvit_m1": {}, "hiera_tiny_224": {"img_size": 64}, "mambaout_femto": {},
             "ghostnetv2_100": {}, "selecsls42b": {}, "tinynet_e": {}, "sequencer2d_s": {}}  # fmt: skip
    _each(*[lambda name=name, kw=kw: train(name, **kw) for name, kw in names.items()])


def audio_ninth() -> None:
    import torchaudio
    import torchaudio.functional as F
    import torchaudio.transforms as T

    wave = torch.randn(2, 8000, device=DEVICE)
    lengths = torch.tensor([8000, 6000], device=DEVICE)
    spectrum = torch.stft(wave, 256, return_complex=True, window=torch.hann_window(256, device=DEVICE))

    def conformer() -> None:
        model = torchaudio.models.Conformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=1,
                                            depthwise_conv_kernel_size=3).to(DEVICE)  # fmt: skip
        out, _ = model(torch.randn(2, 20, 16, device=DEVICE), torch.tensor([20, 12], device=DEVICE))
        out.sum().backward()

    def wav2vec2() -> None:
        model = torchaudio.models.wav2vec2_model(
            extractor_mode="group_norm", extractor_conv_layer_config=[(16, 10, 5), (16, 3, 2)],
            extractor_conv_bias=False, encoder_embed_dim=32, encoder_projection_dropout=0.0,
            encoder_pos_conv_kernel=16, encoder_pos_conv_groups=4, encoder_num_layers=1, encoder_num_heads=2,
            encoder_attention_dropout=0.0, encoder_ff_interm_features=64, encoder_ff_interm_dropout=0.0,
            encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.0, aux_num_out=10,
        ).to(DEVICE)  # fmt: skip
        out, _ = model(wave, lengths)
        out.sum().backward()

    _each(
        conformer,
        wav2vec2,
        lambda: torchaudio.models.Wav2Letter(num_classes=10, num_features=1).to(DEVICE)(wave[:, None]),
        lambda: T.Vad(8000)(wave),
        lambda: T.PitchShift(8000, 2).to(DEVICE)(wave),
        lambda: T.TimeStretch(n_freq=129).to(DEVICE)(spectrum, 1.2),
        lambda: T.GriffinLim(n_fft=256, n_iter=4).to(DEVICE)(spectrum.abs()),
        lambda: F.detect_pitch_frequency(wave, 8000),
        lambda: F.spectral_centroid(wave, 8000, 0, torch.hann_window(256, device=DEVICE), 256, 64, 256),
        lambda: F.flanger(wave, 8000),
        lambda: F.phaser(wave, 8000),
        lambda: F.overdrive(wave),
        lambda: F.dither(wave),
        lambda: F.sliding_window_cmn(spectrum.abs().transpose(-1, -2)),
        lambda: F.resample(wave, 8000, 6000),
    )


def lightning_ninth() -> None:
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import BatchSizeFinder, ThroughputMonitor, Timer

    class Module(pl.LightningModule):
        def __init__(self, batch_size: int = 8) -> None:
            super().__init__()
            self.batch_size = batch_size
            self.layer = torch.nn.Linear(16, 3)

        def train_dataloader(self):
            data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 3, (64,)))
            return torch.utils.data.DataLoader(data, batch_size=self.batch_size)

        val_dataloader = train_dataloader

        def training_step(self, batch, _index):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, sync_dist=True)
            return loss

        def validation_step(self, batch, _index):
            x, y = batch
            self.log_dict({"val_loss": torch.nn.functional.cross_entropy(self.layer(x), y),
                           "val_acc": (self.layer(x).argmax(-1) == y).float().mean()}, on_epoch=True)  # fmt: skip

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    folder = Path(os.environ.get("OUT", "/tmp")) / "lightning-ninth"
    common = {"accelerator": "gpu", "devices": 1, "default_root_dir": folder, "enable_checkpointing": False,
              "enable_model_summary": False, "enable_progress_bar": False, "logger": False, "max_epochs": 1}  # fmt: skip
    _each(
        lambda: pl.Trainer(callbacks=[BatchSizeFinder(max_trials=2)], **common).fit(Module()),
        lambda: pl.Trainer(detect_anomaly=True, **common).fit(Module()),
        lambda: pl.Trainer(callbacks=[Timer(), ThroughputMonitor(batch_size_fn=lambda b: b[0].size(0))],
                           **common).fit(Module()),  # fmt: skip
        lambda: pl.Trainer(accumulate_grad_batches=2, gradient_clip_val=0.5, gradient_clip_algorithm="value",
                           precision="bf16-mixed", **common).fit(Module()),  # fmt: skip
    )


def adapters_ninth() -> None:
    import peft
    from transformers import GPT2Config, GPT2LMHeadModel

    ids = torch.randint(0, 500, (2, 16), device=DEVICE)

    def tuned(config) -> None:
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=500, n_positions=64))
        peft.get_peft_model(model, config).to(DEVICE)(input_ids=ids, labels=ids).loss.backward()

    lm = {"task_type": "CAUSAL_LM"}
    _each(
        lambda: tuned(peft.LoKrConfig(r=4, target_modules=["c_fc"])),
        lambda: tuned(peft.PrefixTuningConfig(num_virtual_tokens=4, **lm)),
        lambda: tuned(peft.PromptEncoderConfig(num_virtual_tokens=4, encoder_hidden_size=16, **lm)),
        lambda: tuned(peft.FourierFTConfig(n_frequency=16, target_modules=["c_fc"])),
        lambda: tuned(peft.LNTuningConfig(target_modules=["ln_f"], **lm)),
        lambda: tuned(peft.HRAConfig(r=4, target_modules=["c_fc"])),
        lambda: tuned(peft.VBLoRAConfig(r=4, num_vectors=16, vector_length=8, target_modules=["c_fc"])),
        lambda: tuned(peft.AdaLoraConfig(r=4, target_modules=["c_attn"], total_step=4, init_r=6, target_r=2)),
    )


HELD_OUT_9 = [hf_models_ninth, generation_ninth, metrics_ninth, graph_ninth, vision_ninth, timm_models_ninth,
              audio_ninth, lightning_ninth, adapters_ninth]  # fmt: skip
