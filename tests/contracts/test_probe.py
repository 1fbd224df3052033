def test_probe(accounts, project):
    c = accounts[0].deploy(project.Probe)
    assert c.totalSupply() == 0
