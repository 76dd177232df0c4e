from tinytrain.data import as_list, loader


def test_dataloader_with_workers_sees_every_item_once():
    batches = list(loader(10, batch_size=4, workers=2))
    assert len(batches) == 3
    assert sorted(as_list(batches)) == [float(i * i) for i in range(10)]
