"""The attention features for the peers that serve them: the rule as plain Python (which keys a row sees, the score
mods of one score), the fp32 torch reference with every feature, and which features a peer takes. The semantics
are the README's "Attention features": scores s = scale q.k; softcap c tanh(s / c), then ALiBi slope_h (j - i'),
then the qq-bias among the new tokens; the mask (causal, sliding window) last; a sink joins the softmax's
denominator only. Row i sits at key position i' = i + kv_len - q_len. The reference below is written apart from
any peer's own statement of the rule (a peer's score_mod and mask_mod), so that the gate checks the peer."""

FEATURE_NAMES = ("window_left", "window_right", "softcap", "alibi_slopes", "sinks", "qq_bias_len", "k_scale",
                 "v_scale")


def visible(c, i, j, q_len, kv_len):
    """Whether key j is visible to query row i of a sequence (plain Python)."""
    f, ip = c.features, i + kv_len - q_len
    if not 0 <= j < kv_len or (c.causal and j > ip):
        return False
    if f.get("window_left", -1) >= 0 and j < ip - f["window_left"]:
        return False
    return not (f.get("window_right", -1) >= 0 and j > ip + f["window_right"])


def modded_score(c, s, h, i, j, q_len, kv_len, tanh):
    """The scaled score s of row i, key j, head h after the mods (tanh: math.tanh or torch.tanh)."""
    f, ip, new_from = c.features, i + kv_len - q_len, kv_len - q_len
    if f.get("softcap", 0):
        s = f["softcap"] * tanh(s / f["softcap"])
    if f.get("alibi_slopes"):
        s = s + f["alibi_slopes"][h] * (j - ip)
    if f.get("qq_bias_len") and j >= new_from:
        s = s + f["qq_bias"][i][j - new_from]
    return s


def feature_decline(c, served, peer):
    """Why `peer` cannot take the case's features ("" when it can): the first feature outside `served`."""
    for name in FEATURE_NAMES:
        if name in c.features and name not in served:
            return f"feature '{'qq_bias' if name == 'qq_bias_len' else name}': not expressed by {peer}"
    return c.mask_decline()


def reference(torch, c, q, k, v):
    """fp32 attention with the case's features, [B, H, q, d] from q [B, H, q, d], k/v [B, KVH, kv, d]. Query heads
    sharing a kv head are stacked as rows (head h reads kv head h // group); chunked over rows."""
    B, H, ql, d = q.shape
    kvh, kvl = k.shape[1], k.shape[2]
    group, f, dev = H // kvh, c.features, q.device
    qg = q.float().reshape(B, kvh, group * ql, d)
    kf, vf = k.float(), v.float()
    out = torch.empty(B, kvh, qg.shape[2], vf.shape[-1], device=dev, dtype=torch.float32)
    j = torch.arange(kvl, device=dev)[None, :]
    rows = max(1, min(qg.shape[2], (1 << 27) // max(1, B * kvh * kvl)))
    for r0 in range(0, qg.shape[2], rows):
        r = torch.arange(r0, min(r0 + rows, qg.shape[2]), device=dev)
        i, ip = r % ql, (r % ql + kvl - ql)[:, None]
        head = torch.arange(kvh, device=dev)[:, None] * group + (r // ql)[None, :]  # [kvh, rows]
        s = (qg[:, :, r0:r0 + len(r)] @ kf.transpose(-1, -2)) * c.softmax_scale()
        if f.get("softcap"):
            s = f["softcap"] * torch.tanh(s / f["softcap"])
        if f.get("alibi_slopes"):
            slopes = torch.tensor(f["alibi_slopes"], device=dev)[head]
            s = s + slopes[None, :, :, None] * (j - ip).float()[None, None]
        if f.get("qq_bias_len"):
            bias = torch.zeros(len(r), kvl, device=dev)
            table = torch.tensor(f["qq_bias"], device=dev)  # [qq_bias_len, qq_bias_len]
            bias[:, kvl - ql:] = table[i][:, :ql]
            s = s + bias[None, None]
        keep = torch.ones(len(r), kvl, dtype=torch.bool, device=dev)
        if c.causal:
            keep &= j <= ip
        if f.get("window_left", -1) >= 0:
            keep &= j >= ip - f["window_left"]
        if f.get("window_right", -1) >= 0:
            keep &= j <= ip + f["window_right"]
        s = s.masked_fill(~keep[None, None], float("-inf"))
        m = s.amax(-1, keepdim=True)
        if f.get("sinks"):
            sink = torch.tensor(f["sinks"], device=dev)[head][None, :, :, None]
            m = torch.maximum(m, sink)
        m = torch.nan_to_num(m, neginf=0.0)
        p = torch.exp(s - m)
        denom = p.sum(-1, keepdim=True)
        if f.get("sinks"):
            denom = denom + torch.exp(sink - m)
        out[:, :, r0:r0 + len(r)] = (p @ vf) / denom.clamp_min(1e-30)
    return out.reshape(B, H, ql, vf.shape[-1])


def attention_reference(torch, c, calls, pack):
    """The features reference of every call, packed [total_q, H, d] by `pack`."""
    return pack(torch, [reference(torch, c, q, k, v) for q, k, v in calls])
