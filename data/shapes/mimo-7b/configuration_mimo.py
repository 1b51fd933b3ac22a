"""MiMo's config class: Qwen2's, plus the number of MTP layers (vLLM loads it with trust_remote_code=True).

The published checkpoint ships a file of this name; a shape folder needs it too, because
transformers does not know the model type "mimo" by itself.
"""

from transformers.models.qwen2.configuration_qwen2 import Qwen2Config


class MiMoConfig(Qwen2Config):
    model_type = "mimo"

    def __init__(self, *args, num_nextn_predict_layers: int = 0, **kwargs):
        self.num_nextn_predict_layers = num_nextn_predict_layers
        super().__init__(*args, **kwargs)
