"""The Chinese labels of the course's diagrams (``chapters/figures/NAME.zh_CN.svg``).

``tools/make_diagrams.py`` draws every diagram a second time after
``style.use_language("zh_CN")``; every label then passes through ``style.translate``, which
looks it up here:

* ``LABELS``: English label, exactly as the source ``tools/diagrams/chNN.py`` writes it ->
  Chinese label;
* ``KEEP``: labels that stay as they are in the Chinese diagrams: code names (``softmax``,
  ``split_heads``, ``al.causal_mask(6)``), module and layer names (``LayerNorm``, ``MLP``),
  acronyms (``MHA``, ``GQA``), the example sentences' tokens, shapes with a word in them.

Labels that are only math (``$...$``), shapes or numbers are kept without being listed. A
label in neither table makes ``make_diagrams.py`` fail, naming it.

The terms are those of ``book/glossary.md`` (d2l-zh: 查询, 键, 值, 注意力汇聚, 词元, 掩码/掩蔽,
填充, 键值缓存, 分块 ...). Math stays math, code stays code, shapes stay shapes; Chinese
labels use full-width punctuation (，：（）) and one space between Chinese and Latin/math.
After a change: ``make diagrams``, then look at ``make_diagrams.py --preview DIR`` (the
Chinese text must fit the same boxes as the English).
"""

LABELS = {
    # -- used by several chapters (legends, row and column names)
    "query": "查询",
    "key": "键",
    "value": "值",
    "score": "分数",
    "weight": "权重",
    "output": "输出",
    "mask": "掩码",
    "queries": "查询",
    "keys": "键",
    "values": "值",
    "scores": "分数",
    "weights": "权重",
    "masked scores": "掩蔽后的分数",
    "learned matrix": "可学习矩阵",
    "softmax over the K keys": "对 K 个键做 softmax",
    # -- chapter 1: attention pooling of one query, the four special cases of the weights
    "Attention pooling of one query": "单个查询的注意力汇聚",
    "one column per key-value pair (here K = 4)": "每个键值对一列（此处 K = 4）",
    r"scores $a(\mathbf{q}, \mathbf{k}_i)$, one per key": r"分数 $a(\mathbf{q}, \mathbf{k}_i)$，每个键一个",
    r"query $\mathbf{q}$": r"查询 $\mathbf{q}$",
    r"weights $\alpha_i$": r"权重 $\alpha_i$",
    r"values $\mathbf{v}_i$": r"值 $\mathbf{v}_i$",
    r"Four special cases of the weights $\alpha_1, \ldots, \alpha_4$": r"权重 $\alpha_1, \ldots, \alpha_4$ 的四种特殊情况",
    "non-negative": "非负",
    "convex": "凸组合",
    "uniform": "均匀",
    r"in the convex cone of the $\mathbf{v}_i$": r"位于各 $\mathbf{v}_i$ 的凸锥内",
    "(the weights sum to 2 here)": "（此处权重之和为 2）",
    r"in the convex hull of the $\mathbf{v}_i$": r"位于各 $\mathbf{v}_i$ 的凸包内",
    "(a weighted mean)": "（加权平均）",
    "(a database lookup)": "（数据库查找）",
    r"$=$ the mean of the $\mathbf{v}_i$": r"$=$ 各 $\mathbf{v}_i$ 的均值",
    "(average pooling)": "（平均池化）",
    # -- chapter 2: Nadaraya–Watson regression as attention pooling
    "Nadaraya–Watson regression is attention pooling": "Nadaraya-Watson 回归就是注意力汇聚",
    r"one query $x = 2.0$, six training points, Gaussian kernel, $h = 0.5$:  score $a_i = -(x - x_i)^2 / 2h^2$": (
        r"一个查询 $x = 2.0$，六个训练点，高斯核，$h = 0.5$：分数 $a_i = -(x - x_i)^2 / 2h^2$"
    ),
    r"$x_i$ = training inputs": r"$x_i$ = 训练输入",
    "kernel values": "核值",
    "kernel value": "核值",
    r"$y_i$ = training targets": r"$y_i$ = 训练目标",
    "weighted values": "加权后的值",
    r"query $x = 2.0$": r"查询 $x = 2.0$",
    "compare": "比较",
    "with every key": "与每个键",
    "÷ their sum": "÷ 它们的和",
    "column by column": "逐列",
    "add up": "求和",
    r"output $f(x) = \Sigma_i\,\alpha(x, x_i)\,y_i = 3.63$": r"输出 $f(x) = \Sigma_i\,\alpha(x, x_i)\,y_i = 3.63$",
    r"(truth $3.82$)": r"（真实值 $3.82$）",
    # -- chapter 3: the keep-mask acts on the scores, before the softmax
    "Masking acts on the scores, before the softmax": "掩蔽作用于 softmax 之前的分数",
    "padded batch (B, n) = (3, 4)": "填充后的批量 (B, n) = (3, 4)",
    "keep-mask": "保留掩码",
    "T = keep\nhatched = masked": "T = 保留\n斜线 = 被掩蔽",
    'example b = 2, "Hello world":\nQ = 4 queries × K = 4 keys': "示例 b = 2，“Hello world”：\nQ = 4 个查询 × K = 4 个键",
    "words": "单词",
    "fill": "填入 min",  # the masked_fill step: the masked scores become min
    "masked": "被掩蔽处",
    "over K": "沿 K 维",
    "min = most negative float": "min = 最负的浮点数",  # chapter 3's words (chapter 5: 最小的浮点数)
    "padding: exactly 0": "填充列：恰好为 0",
    "each row sums to 1": "每行之和为 1",
    "mask of b = 2,\nbroadcast over Q": "b = 2 的掩码，\n沿 Q 广播",
    "not changed": "不变",
    "the <pad> rows of the\nvalues get weight 0:\nthey cannot reach\nthe output": "值中的 <pad> 行\n权重为 0：\n影响不到输出",
    "mask / padding": "掩码 / 填充",
    # -- chapter 4: the additive scoring network; one decoder step of Bahdanau attention
    "Additive attention scores every query–key pair": "加性注意力为每一对查询和键打分",
    r"queries $\mathbf{q}$": r"查询 $\mathbf{q}$",
    r"keys $\mathbf{k}$": r"键 $\mathbf{k}$",
    "broadcast": "广播",
    "features": "特征",
    "one hidden vector\nper (query, key) pair": "每个（查询，键）对\n一个隐藏向量",
    r"scores $a(\mathbf{q}, \mathbf{k})$": r"分数 $a(\mathbf{q}, \mathbf{k})$",
    "squeeze the last axis": "去掉最后一维",
    "learned": "可学习",
    "Bahdanau attention: decoder step i": "Bahdanau 注意力：解码器第 i 步",
    "bidirectional GRU encoder": "双向 GRU 编码器",
    "source tokens": "源词元",
    "annotations": "注释",
    "additive attention": "加性注意力",
    r"$a(\mathbf{s}_{i-1}, \mathbf{h}_j)$, softmax over $j$": r"$a(\mathbf{s}_{i-1}, \mathbf{h}_j)$，对 $j$ 做 softmax",
    r"context $\mathbf{c}_i$": r"上下文 $\mathbf{c}_i$",
    r"state $\mathbf{s}_{i-1}$": r"状态 $\mathbf{s}_{i-1}$",
    "GRU cell": "GRU 单元",
    "output layer": "输出层",
    r"next step: $\mathbf{s}_i$ becomes the state (the query) of step $i+1$": (
        r"下一步：$\mathbf{s}_i$ 成为第 $i+1$ 步的状态（即查询）"
    ),
    "query (state)": "查询（状态）",
    "keys = annotations": "键 = 注释",
    "values = annotations": "值 = 注释",
    "context": "上下文",
    # -- chapter 5: the scaled dot-product attention block
    "Scaled dot-product attention": "缩放点积注意力",
    r"queries $\mathbf{Q}$": r"查询 $\mathbf{Q}$",
    r"keys $\mathbf{K}$": r"键 $\mathbf{K}$",
    r"values $\mathbf{V}$": r"值 $\mathbf{V}$",
    r"MatMul: $\mathbf{Q}\,\mathbf{K}^\top$": r"MatMul：$\mathbf{Q}\,\mathbf{K}^\top$",
    r"scale: $\times\; 1/\sqrt{d}$  ($d = D$)": r"缩放：$\times\; 1/\sqrt{d}$（$d = D$）",
    "mask (optional)": "掩码（可选）",
    "masked scores → finfo.min (lowest float)": "被掩蔽的分数 → finfo.min（最小的浮点数）",
    "fully masked row → weights 0": "全掩蔽行 → 权重为 0",
    "scaled scores": "缩放后的分数",
    r"MatMul: weights $\cdot\, \mathbf{V}$": r"MatMul：权重 $\cdot\, \mathbf{V}$",
    # -- chapter 6: the three projections; one token against every token; the causal mask
    "One input, three projections": "一个输入，三个投影",
    "one row per token": "每个词元一行",
    r"the same $W^Q, W^K, W^V$ for every token:  row $i$ of $Q$ is $\mathbf{q}_i = \mathbf{x}_i W^Q$": (
        r"每个词元都用同一组 $W^Q, W^K, W^V$：$Q$ 的第 $i$ 行是 $\mathbf{q}_i = \mathbf{x}_i W^Q$"
    ),
    "Token 1 against all four tokens": "词元 1 对全部四个词元",
    r"keys $\mathbf{k}_j$": r"键 $\mathbf{k}_j$",
    "scaled score": "缩放后的分数",
    r"weight $\alpha_{1j}$": r"权重 $\alpha_{1j}$",
    r"values $\mathbf{v}_j$": r"值 $\mathbf{v}_j$",
    "itself": "自身",
    "softmax over j": "对 j 做 softmax",
    "sum = 1": "和为 1",
    r"$\mathbf{o}_1 = \sum_j \alpha_{1j}\,\mathbf{v}_j$ : every token (itself included) contributes, in proportion to its weight": (
        r"$\mathbf{o}_1 = \sum_j \alpha_{1j}\,\mathbf{v}_j$：每个词元（包括自身）都按其权重作出贡献"
    ),
    "The causal mask: no query sees the future": "因果掩码：任何查询都看不到未来",
    "key position j": "键位置 j",
    "query position i": "查询位置 i",
    "(n, n) bool, True = keep": "(n, n) bool，True = 保留",
    "row 2: query 2 attends": "第 2 行：查询 2",
    "to keys 0, 1, 2 only": "只关注键 0、1、2",
    "or is_causal=True": "或 is_causal=True",
    "T = kept (j ≤ i)": "T = 保留（j ≤ i）",
    "masked (j > i)": "被掩蔽（j > i）",
    # -- chapter 7: one multi-head attention forward pass
    "Multi-head attention: split, attend in each head, merge": "多头注意力：拆分，各头分别计算注意力，再合并",
    r"attention in each head $h$, on its own (scale $1/\sqrt{d}$):": r"每个头 $h$ 独立计算注意力（缩放因子 $1/\sqrt{d}$）：",
    "head 0": "头 0",
    "head 1": "头 1",
    "head H−1": "头 H−1",
    "weights of all heads:": "所有头的权重：",
    "merge_heads  (= Concat)": "merge_heads（即 Concat）",
    # -- chapter 8: which query heads share which key/value head; one decoding step with a
    # KV cache
    "H = 8 query heads share Hkv key/value heads": "H = 8 个查询头共享 Hkv 个键值头",
    "query head h uses key/value head h // g, with g = H / Hkv": "查询头 h 使用键值头 h // g，其中 g = H / Hkv",
    r"key head $k_0$": r"键头 $k_0$",
    r"key head $k_1$": r"键头 $k_1$",
    r"value head $v_0$": r"值头 $v_0$",
    r"value head $v_1$": r"值头 $v_1$",
    "query head": "查询头",
    "key head": "键头",
    "value head": "值头",
    "One decoding step with a KV cache": "带键值缓存的一个解码步",
    "the new key and value become row T of the cache;": "新的键和值成为缓存的第 T 行；",
    "the new query reads all T + 1 keys": "新的查询读取全部 T + 1 个键",
    r"new token $x_T$": r"新词元 $x_T$",
    "key cache": "键缓存",
    "value cache": "值缓存",
    "append": "追加",
    # two lines under the query: "对全部 T + 1 个键" / "打分" (the Chinese order of "scores with" / "all T + 1 keys")
    "scores with": "对全部 T + 1 个键",
    "all T + 1 keys": "打分",
    "weights, one per key": "权重，每个键一个",
    "weighted sum": "加权和",
    "output of the head": "该头的输出",
    "All g query heads of a group read this same key/value head.": "同一组的 g 个查询头都读取这同一个键值头。",
    "Next step: T + 1 tokens cached, one more row.": "下一步：已缓存 T + 1 个词元，多出一行。",
    # -- chapter 9: the tiny decoder-only model; one MQAR sequence
    "al.TinyDecoder: a decoder-only Transformer": "al.TinyDecoder：仅解码器的 Transformer",
    "tokens (token ids)": "词元（词元 id）",
    "token embedding (learned)": "词元嵌入（可学习）",
    "sinusoidal positions (fixed)": "正弦位置编码（固定）",
    "× L blocks (num_layers)": "× L 个块（num_layers）",
    "causal grouped-query attention": "因果分组查询注意力",
    "H query heads, Hkv key/value heads": "H 个查询头，Hkv 个键值头",
    "residual": "残差",
    "KV cache": "键值缓存",
    "cached keys": "缓存的键",
    "cached values": "缓存的值",
    "append n": "追加 n 个",
    "read all T + n": "读取 T + n 个",
    "logits: one score per token id": "logits：每个词元 id 一个分数",
    "learned layer": "可学习层",
    "One MQAR sequence: a database, then questions": "一条 MQAR 序列：先是数据库，然后是问题",
    "position": "位置",
    "6 records, one token each: (key, value)": "6 条记录，每条一个词元：（键，值）",
    "questions and answers": "问题和答案",
    "attends to the record of key 0": "关注键 0 的记录",
    "predicts v6": "预测 v6",
    "The loss counts only the answer positions (the next token after each question).": (
        "损失只计算答案位置（每个问题之后的下一个词元）。"
    ),
    "Keys and values are drawn afresh for every sequence: nothing to memorise.": (
        "每条序列的键和值都重新抽取：无法靠死记硬背。"
    ),
    "question": "问题",
    "answer": "答案",
    "attention": "注意力",
    # -- chapter 10: tiled attention and its running state; causal tiles; split-K decoding
    "Tiled attention: one query block walks through the key blocks": "分块注意力：一个查询块依次遍历各个键块",
    "done": "已完成",
    "next": "待计算",
    "only the current (b × b) tile of scores exists": "只存在当前这一个 (b × b) 分数分块",
    "running state of query block $Q_1$": "查询块 $Q_1$ 的累积状态",
    "running maximum": "当前最大值",
    "running sum": "累加和",
    "unnormalised output": "未归一化输出",
    "for the tile $S_{12} = Q_1 K_2^\\top / \\sqrt{d}$:": "对分块 $S_{12} = Q_1 K_2^\\top / \\sqrt{d}$：",
    "after $K_3$:  $O_1 = acc\\, /\\, \\ell$,   lse $= m + \\log \\ell$": (
        "处理完 $K_3$ 后：$O_1 = acc\\, /\\, \\ell$，lse $= m + \\log \\ell$"
    ),
    "Causal attention: the tiles above the diagonal are never computed": "因果注意力：对角线上方的分块从不计算",
    "key blocks →": "键块 →",
    "query blocks →": "查询块 →",
    "skipped: every key after every query": "跳过：分块内所有键都在所有查询之后",
    "computed with the mask inside the tile": "计算，分块内使用掩码",
    "computed, no mask needed": "计算，无需掩码",
    "28 tiles": "28 个分块",
    "8 tiles": "8 个分块",
    r"computed: 8 + 28 = 36 of 64 tiles = $n_b(n_b + 1)\,/\,2$": r"计算：64 个分块中的 8 + 28 = 36 个 = $n_b(n_b + 1)\,/\,2$",
    r"a fraction $(n_b + 1)\,/\,2n_b$ ($n_b$ = 8 blocks), which tends to one half": (
        r"所占比例 $(n_b + 1)\,/\,2n_b$（$n_b$ = 8 个块），趋近于一半"
    ),
    # the chunks of the cache are 段, as in the chapter (块 is a query/key block there)
    "Split-K decoding: attend to chunks of the cache in parallel, then merge": "Split-K 解码：对缓存的各段并行计算注意力，再合并",
    "new query q": "新查询 q",
    "keys, values 0": "第 0 段的键和值",
    "keys, values 1": "第 1 段的键和值",
    "keys, values 2": "第 2 段的键和值",
    "keys, values 3": "第 3 段的键和值",
    r"$\mathbf{o} = \sum_c e^{L_c - L}\, \mathbf{o}_c, \quad L = \log \sum_c e^{L_c}$:  exact": r"$\mathbf{o} = \sum_c e^{L_c - L}\, \mathbf{o}_c, \quad L = \log \sum_c e^{L_c}$：结果精确",
    "the cache of T tokens, split into 4 chunks (each attended independently)": "T 个词元的缓存，分成 4 段（各段独立计算注意力）",
    # -- chapter 12
    "What one token leaves in the cache of one layer": "一个词元在一层的缓存中留下什么",
    "H = 4 query heads of width d": "H = 4 个宽度为 d 的查询头",
    "numbers": "数的个数",
    r"latent $c$": r"潜在向量 $c$",
    r"every head rebuilds its key and value from $c$:": r"每个头从 $c$ 重建自己的键和值：",
    r"$k_h = W_{UK,h}\, c$, $v_h = W_{UV,h}\, c$; $k^R$ carries the positions": (
        r"$k_h = W_{UK,h}\, c$，$v_h = W_{UV,h}\, c$；$k^R$ 携带位置"
    ),
    "latent (MLA)": "潜在向量（MLA）",
    "Absorbed decoding: one head attends to the cached latents": "吸收后的解码：一个头直接对缓存的潜在向量计算注意力",
    "latent cache": "潜在向量缓存",
    "dot product with every row": "与每一行做点积",
    r"$W_o$ (all heads)": r"$W_o$（所有头）",
    "never built: a key or a value of any cached token": "任何已缓存词元的键和值都无需构建",
    "latent": "潜在向量",
    "rotary key": "旋转键",
    "weight matrix": "权重矩阵",
    "head output": "头的输出",
    # -- chapter 13
    "One causal step, two ways": "一个因果步骤的两种算法",
    "softmax attention: a kernel smoother": "softmax 注意力：核平滑器",
    "linear attention: a recurrence": "线性注意力：递推",
    "grows by one row a token: (T, d) keys and values": "每个词元增加一行：(T, d) 的键和值",
    "state and output": "状态和输出",
    "state $S$": "状态 $S$",
    r"write: $S \leftarrow S + v_t\,\phi(k_t)^\top$, $z \leftarrow z + \phi(k_t)$": (
        r"写入：$S \leftarrow S + v_t\,\phi(k_t)^\top$，$z \leftarrow z + \phi(k_t)$"
    ),
    r"read: $o_t = S\,\phi(q_t)\,/\,(z \cdot \phi(q_t))$": (
        r"读出：$o_t = S\,\phi(q_t)\,/\,(z \cdot \phi(q_t))$"
    ),
    "fixed size: the same after 10 tokens or a million": "大小固定：10 个词元之后和一百万个词元之后一样",
    "read": "读出",
    "The delta rule: read, compare, write the correction": "delta 规则：读出、比较、写入修正",
    "decay gate": "衰减门",
    "(optional)": "（可选）",
    "error": "误差",
    "new $S$": "新的 $S$",
    "with a = 1, β = 1 and |k| = 1, the new S returns exactly v for k": (
        "当 a = 1、β = 1 且 |k| = 1 时，新的 S 对 k 恰好返回 v"
    ),
    r"additive rule instead: $a\,S + v\,k^\top$ (nothing is read)": (
        r"换成加法规则：$a\,S + v\,k^\top$（不读出任何东西）"
    ),
    "state": "状态",
    "correction": "修正",
    # -- chapter 11
    "A sliding window of W = 4 keys plus S = 2 sink tokens": "W = 4 个键的滑动窗口，加上 S = 2 个锚点词元",
    "key position j": "键的位置 j",
    "query position i": "查询的位置 i",
    "sink tokens: always seen": "锚点词元：始终可见",
    "window: the last W keys": "窗口：最近的 W 个键",
    "dropped from the cache": "已移出缓存",
    "future: the causal mask": "未来位置：因果掩码",
    "the cache keeps S + W - 1 = 5": "缓存保留 S + W - 1 = 5 个位置",
    "keys rotated at absolute positions": "键按绝对位置旋转",
    "RoPE turns each pair of features by position × ω; the score sees i − j": "RoPE 把每对特征旋转“位置 × ω”的角度；分数只取决于 i − j",
    "dashed: position 0": "虚线：位置 0",
    "arcs: the turn to": "弧线：转到",
    "each position": "各自位置",
    "$i = 4$: q turned by $4\\omega$;  $j = 1$: k turned by $1\\omega$": "$i = 4$：q 转过 $4\\omega$；$j = 1$：k 转过 $1\\omega$",
    "$i = 7$: q turned by $7\\omega$;  $j = 4$: k turned by $4\\omega$": "$i = 7$：q 转过 $7\\omega$；$j = 4$：k 转过 $4\\omega$",
    "the same angle (i − j)ω between q and k, so the same score $\\mathbf{q}_i^\\top\\mathbf{k}_j$": "q 与 k 的夹角同为 (i − j)ω，所以分数 $\\mathbf{q}_i^\\top\\mathbf{k}_j$ 相同",
    "A Llama decoder block (SmolLM2: ×30)": "Llama 解码器块（SmolLM2：×30）",
    "grouped-query attention": "分组查询注意力",
    "H = 9 query heads, Hkv = 3": "H = 9 个查询头，Hkv = 3",
    "residual": "残差连接",
    "x / rms(x) in float32, then × gain": "x / rms(x) 用 float32 计算，再 × 增益",
    "q: 9 heads, k and v: 3 heads": "q：9 个头；k 和 v：3 个头",
    "rotate q and k at their positions": "按各自的位置旋转 q 和 k",
    "each kv head serves g = 3 q heads": "每个键值头供 g = 3 个查询头共用",
}

KEEP = [
    # -- used by several chapters
    "softmax",  # the function's name, as in the chapters' text
    # -- chapter 1
    "one-hot",  # the glossary keeps it: one-hot 编码
    # -- chapter 3: the example batch's tokens are data, as in the chapter's text
    "Dive",
    "into",
    "Deep",
    "Learning",
    "Learn",
    "code",
    "Hello",
    "world",
    "<pad>",
    "min",  # the fill value, torch.finfo(dtype).min
    "valid_lens",  # the argument's name
    # -- chapter 6
    "al.causal_mask(6)",
    # -- chapter 7
    "split_heads",
    # -- chapter 8
    "MHA",
    "GQA",
    "MQA",
    "Hkv = H = 8",
    "Hkv = 2",
    "Hkv = 1",
    "(B, Hkv, T, d)",
    "(B, Hkv, T+1, d)",
    r"softmax$(q_T K^\top/\sqrt{d})$",
    # -- chapter 9: al.TinyDecoder's layers, as the code names them
    "LayerNorm",
    "MLP",
    # -- chapter 11: layer names and the MLP's formula, as in the chapter's code
    "RMSNorm",
    "RoPE",
    "SwiGLU MLP",
    "down(silu(gate x) ⊙ up x)",
    "Linear E→4E, GELU, Linear 4E→E",
    "Linear E → V",
    "offset .. offset+n-1",
    # -- chapter 10: the variables of the code
    "acc",
    "o, lse",
    "merge_attention",
    # -- chapter 12: the knobs, as in the code and the text
    "MLA",
    "Hkv = H = 4",
    "r = 2d, dr = d/2",
]
