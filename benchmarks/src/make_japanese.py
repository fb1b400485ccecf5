"""Writes benchmarks/japanese_text.jsonl: Japanese texts whose perplexity the model must keep in bounds.

The texts were written for this project (no copied material). Rows are `perplexity` rows scored on their
input; the bound is the same for every row, set where the embedded base model passes most of them, so the
benchmark detects an adapter that makes Japanese text much less likely. Run from the repository root:
`python benchmarks/src/make_japanese.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

THRESHOLD = 60.0
INSTRUCTION = "日本語の文章"  # perplexity rows score their input; the instruction only labels the row

# (difficulty, tags, text)
# fmt: off  (one sentence a line: ruff counts a wide character as two columns)
ROWS: list[tuple[str, list[str], str]] = [
    # easy: short everyday sentences, mostly hiragana
    ("easy", ["daily"], "きょうは あさから あめが ふっています。かさを もって でかけましょう。"),
    ("easy", ["daily"], "わたしは まいにち あさごはんに パンを たべます。"),
    ("easy", ["daily"], "ねこが まどの そばで ひなたぼっこを しています。"),
    ("easy", ["daily"], "あしたは ともだちと こうえんで あそぶ やくそくが あります。"),
    ("easy", ["daily"], "おなかが すいたので、おにぎりを ふたつ たべました。"),
    ("easy", ["daily"], "今日はとても暑いですね。冷たいお茶を飲みましょう。"),
    ("easy", ["daily"], "駅まで歩いて十分ぐらいかかります。"),
    ("easy", ["daily"], "週末は家でゆっくり本を読むつもりです。"),
    ("easy", ["daily"], "この店のラーメンはとてもおいしいです。"),
    ("easy", ["daily"], "朝起きたら、まず顔を洗って歯をみがきます。"),
    ("easy", ["daily"], "母は毎朝六時に起きて、お弁当を作ってくれます。"),
    ("easy", ["daily"], "電車が遅れたので、会議に少し遅刻しました。"),
    ("easy", ["daily"], "春になると、公園の桜がきれいに咲きます。"),
    ("easy", ["daily"], "先週、友だちと映画を見に行きました。"),
    ("easy", ["daily"], "お風呂に入ってから、すぐに寝ました。"),
    ("easy", ["daily"], "妹は犬が大好きで、毎日散歩に連れて行きます。"),
    ("easy", ["daily", "edge", "short"], "はい、そうです。"),
    ("easy", ["daily", "edge", "short"], "ありがとう。"),
    # medium: explanatory and news-style prose, kanji and katakana mixed
    ("medium", ["news"], "市の図書館は来月から開館時間を延長し、平日は午後九時まで利用できるようになる。"),
    ("medium", ["news"], "気象庁によると、週の後半は高気圧に覆われ、全国的に晴れる見込みだという。"),
    ("medium", ["news"], "新しい駅ビルには、飲食店や書店など約八十の店舗が入る予定だ。"),
    ("medium", ["news"], "地元の高校生が考案した防災マップが、市の公式サイトで公開された。"),
    ("medium", ["news"], "この冬は野菜の価格が上がり、家計への影響を心配する声が広がっている。"),
    ("medium", ["news"], "町内会では、高齢者の見守り活動に参加するボランティアを募集している。"),
    ("medium", ["explain"], "植物は光合成によって、二酸化炭素と水から糖と酸素を作り出す。"),
    ("medium", ["explain"], "地震が起きたときは、まず机の下にもぐって頭を守ることが大切です。"),
    ("medium", ["explain"], "日本の四季は、春夏秋冬それぞれに異なる行事や食べ物と結びついている。"),
    ("medium", ["explain"], "お茶の葉は、摘んだ後の加工の仕方によって緑茶にも紅茶にもなる。"),
    ("medium", ["explain"], "月の満ち欠けは、太陽と地球と月の位置関係が変わることで起こる。"),
    ("medium", ["explain"], "発酵食品には、みそやしょうゆ、納豆など、日本の食卓に欠かせないものが多い。"),
    ("medium", ["explain"], "川の上流では流れが速く、下流に行くほど川幅が広くなって流れがゆるやかになる。"),
    ("medium", ["tech"], "このアプリでは、写真を撮るだけで料理のカロリーを自動で計算できます。"),
    ("medium", ["tech"], "パスワードは定期的に変更し、ほかのサービスと同じものを使わないようにしましょう。"),
    ("medium", ["tech"], "スマートフォンの電池を長持ちさせるには、画面の明るさを下げるのが効果的です。"),
    ("medium", ["tech"], "クラウドにデータを保存しておけば、パソコンが故障しても安心です。"),
    ("medium", ["tech"], "プログラムの不具合を見つけたら、再現する手順を記録してから報告してください。"),
    ("medium", ["story"], "少年は古い地図を手に、まだ誰も登ったことのない山を目指して歩き出した。"),
    ("medium", ["story"], "夕暮れの港には、漁から戻った船が静かに並んでいた。"),
    ("medium", ["story"], "祖父の家の押し入れから、色あせた写真がたくさん出てきた。"),
    ("medium", ["story"], "雪の降る夜、小さな駅の待合室で、二人は最終列車を待っていた。"),
    ("medium", ["story"], "彼女は手紙を三回読み直してから、そっと封筒に戻した。"),
    ("medium", ["letter"], "拝啓 新緑の候、皆様にはますますご健勝のこととお喜び申し上げます。"),
    ("medium", ["letter"], "先日はお忙しいところ、貴重なお時間をいただき誠にありがとうございました。"),
    ("medium", ["edge", "mixed-script"], "来週のミーティングはZoomで行います。URLは後ほどSlackで共有します。"),
    ("medium", ["edge", "digits"], "２０２４年３月１５日、参加者は合計１，２５０人に達した。"),
    ("medium", ["edge", "halfwidth"], "ｶﾀｶﾅの半角文字は、古いｼｽﾃﾑの画面でよく見かけます。"),
    ("medium", ["edge", "emoji"], "今日のランチは最高でした🍜 また行きたいです😊"),
    ("medium", ["explain"], "ことわざの「急がば回れ」は、危ない近道より安全な遠回りのほうが結局早いという意味だ。"),
    # hard: dense formal, legal, technical or classical prose
    ("hard", ["legal"], "本契約の履行に関して生じた一切の紛争については、東京地方裁判所を第一審の専属的合意管轄裁判所とする。"),
    ("hard", ["legal"], "個人情報取扱事業者は、あらかじめ本人の同意を得ないで、利用目的の達成に必要な範囲を超えて個人情報を取り扱ってはならない。"),
    ("hard", ["science"], "量子もつれ状態にある二つの粒子は、空間的に離れていても測定結果の間に強い相関を示す。"),
    ("hard", ["science"], "深層学習モデルの汎化性能は、訓練データの規模と多様性、正則化手法の選択に大きく依存する。"),
    ("hard", ["medical"], "胸部単純写真にて右下肺野に浸潤影を認め、細菌性肺炎が疑われるため、喀痰培養を提出した。"),
    ("hard", ["medical"], "既往歴として高血圧症及び二型糖尿病があり、降圧薬と経口血糖降下薬を内服中である。"),
    ("hard", ["economy"], "日銀は長期金利の変動幅を拡大し、イールドカーブ・コントロールの運用を柔軟化すると発表した。"),
    ("hard", ["classical"], "春はあけぼの。やうやう白くなりゆく山ぎは、少し明かりて、紫だちたる雲の細くたなびきたる。"),
    ("hard", ["classical"], "月日は百代の過客にして、行きかふ年も又旅人也。"),
    ("hard", ["classical", "edge"], "祇園精舎の鐘の声、諸行無常の響きあり。娑羅双樹の花の色、盛者必衰の理をあらはす。"),
    ("hard", ["engineering"], "本システムは冗長化された二系統の電源装置を備え、片系故障時にも無停止で運転を継続できる。"),
    ("hard", ["engineering", "edge", "long"], (
        "橋梁の維持管理においては、定期点検による損傷の早期発見が重要である。"
        "点検では、主桁や床版のひび割れ、鋼材の腐食、支承の変位などを目視と打音で確認し、"
        "損傷の程度に応じて健全度を四段階で判定する。判定結果は台帳に記録され、"
        "補修の優先順位を決める根拠となる。近年は、ドローンや画像解析技術を用いて、"
        "高所や狭い箇所の点検を効率化する取り組みも進んでいる。"
        "しかし、技術者の経験に基づく判断は依然として欠かせず、若手技術者の育成が課題となっている。"
    )),
]
# fmt: on


def main() -> None:
    out = Path("benchmarks/japanese_text.jsonl")
    lines = []
    for number, (difficulty, tags, text) in enumerate(ROWS, start=1):
        config: dict[str, object] = {"threshold": THRESHOLD}
        if "long" in tags:
            # A short window makes this text span several overlapping windows: the sliding window at work.
            config.update(max_length=64, stride=32)
        row = {
            "id": f"ja-{number:03d}",
            "instruction": INSTRUCTION,
            "input": text,
            "expected_output": "",
            "evaluation_type": "perplexity",
            "evaluation_config": config,
            "difficulty": difficulty,
            "tags": ["japanese", *tags],
        }
        lines.append(json.dumps(row, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} rows to {out}")


if __name__ == "__main__":
    main()
