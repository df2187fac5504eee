"""Solvers as pycaffe documents them: the six classes and get_solver, step,
solve, snapshot and restore, net and test_nets, iter, add_callback and
apply_update; and that a Python solver trains exactly as `cortado train`."""
import os
import subprocess

import numpy as np
import pytest

from conftest import BIN

RULES = {'SGDSolver': 'SGD', 'NesterovSolver': 'Nesterov', 'AdaGradSolver': 'AdaGrad',
         'RMSPropSolver': 'RMSProp', 'AdaDeltaSolver': 'AdaDelta', 'AdamSolver': 'Adam'}


def weights(net):
    return {name: [b.data.copy() for b in blobs] for name, blobs in net.params.items()}


def same_weights(a, b):
    return all(np.array_equal(x, y) for name in a for x, y in zip(a[name], b[name]))


def rule_fields(rule):
    fields = {'type': '"%s"' % rule}
    if rule == 'AdaGrad':
        fields['momentum'] = None  # AdaGrad takes no momentum
    if rule == 'AdaDelta':
        fields.update(base_lr=1.0, momentum=0.95, delta=1e-6, lr_policy='"fixed"', gamma=None, power=None)
    if rule == 'RMSProp':
        fields.update(momentum=None, rms_decay=0.98)
    if rule == 'Adam':
        fields.update(base_lr=0.001, momentum=0.9, momentum2=0.999, lr_policy='"fixed"', gamma=None,
                      power=None)
    return fields


@pytest.mark.parametrize('cls', sorted(RULES))
def test_each_solver_class_trains(caffe, lenet_solver, cls):
    rule = RULES[cls]
    path = lenet_solver('%s.prototxt' % rule, max_iter=6, **rule_fields(rule))
    solver = getattr(caffe, cls)(path)
    assert isinstance(solver, caffe.Solver) and solver.type == rule
    assert solver.iter == 0 and solver.max_iter == 6
    before = weights(solver.net)
    solver.step(3)
    assert solver.iter == 3
    assert not same_weights(before, weights(solver.net))
    assert np.isfinite(solver.net.blobs['loss'].data)
    by_file = caffe.get_solver(path)  # the file's type picks the class
    assert type(by_file) is getattr(caffe, cls) and by_file.type == rule


def test_class_overrides_file_type(caffe, lenet_solver):
    """SGDSolver(file) is SGD whatever the file says, as in Caffe."""
    sgd = caffe.SGDSolver(lenet_solver('sgd.prototxt'))
    adam_fields = dict(rule_fields('Adam'), base_lr=0.01, lr_policy='"inv"', gamma=0.0001, power=0.75)
    forced = caffe.SGDSolver(lenet_solver('adam.prototxt', **adam_fields))
    adam = caffe.AdamSolver(lenet_solver('adam2.prototxt', **adam_fields))
    for s in (sgd, forced, adam):
        s.step(2)
    assert forced.type == 'SGD'
    assert same_weights(weights(sgd.net), weights(forced.net))
    assert not same_weights(weights(sgd.net), weights(adam.net))


def test_matches_cortado_train(caffe, lenet_solver, tmp_path):
    """solver.solve() from Python and `cortado train` on the same solver
    file end with the same weights, bit for bit (CPU, one seed)."""
    cli = lenet_solver('cli.prototxt', max_iter=12, snapshot_prefix='"%s"' % (tmp_path / 'cli'))
    subprocess.run([BIN, 'train', '--solver=' + cli, '--log_level=2'], check=True)
    py = lenet_solver('py.prototxt', max_iter=12)
    solver = caffe.get_solver(py)
    solver.solve()
    ref = caffe.Net(os.path.join(os.path.dirname(cli), 'lenet_train_test.prototxt'), caffe.TEST,
                    weights=str(tmp_path / 'cli_iter_12.caffemodel'))
    assert same_weights(weights(ref), weights(solver.net))


def test_snapshot_restore_continue(caffe, lenet_solver, tmp_path):
    path = lenet_solver('snap.prototxt', max_iter=10)
    a = caffe.SGDSolver(path)
    a.step(5)
    a.snapshot()
    state = str(tmp_path / 'lenet_iter_5.solverstate')
    assert os.path.isfile(state) and os.path.isfile(str(tmp_path / 'lenet_iter_5.caffemodel'))
    a.step(5)
    b = caffe.SGDSolver(path)
    b.restore(state)
    assert b.iter == 5
    b.step(5)
    assert b.iter == 10
    assert same_weights(weights(a.net), weights(b.net))
    c = caffe.SGDSolver(path)
    c.solve(state)  # solve(resume_file)
    assert c.iter == 10 and same_weights(weights(a.net), weights(c.net))
    assert os.path.isfile(str(tmp_path / 'lenet_iter_10.caffemodel'))  # snapshot after training


def test_test_nets_share_weights(caffe, lenet_solver):
    solver = caffe.SGDSolver(lenet_solver('t.prototxt'))
    assert len(solver.test_nets) == 1
    test = solver.test_nets[0]
    assert test.phase == caffe.TEST and 'accuracy' in test.outputs
    solver.net.params['ip2'][1].data[3] = 5.0
    assert test.params['ip2'][1].data[3] == 5.0
    solver.step(2)
    assert np.array_equal(test.params['conv1'][0].data, solver.net.params['conv1'][0].data)
    out = test.forward()
    assert 0.0 <= float(out['accuracy']) <= 1.0
    assert solver.net is solver.net  # one Net object per solver net


def test_callbacks(caffe, lenet_solver):
    solver = caffe.SGDSolver(lenet_solver('cb.prototxt', momentum=0, weight_decay=0))
    calls = []

    def on_start():
        calls.append(('start', solver.iter))

    def on_gradients():
        diff = solver.net.params['conv1'][0].diff
        calls.append(('gradients', solver.iter, bool(np.abs(diff).sum() > 0)))
        for blobs in solver.net.params.values():
            for b in blobs:
                b.diff[...] = 0  # no update at all

    solver.add_callback(on_start, on_gradients)
    before = weights(solver.net)
    solver.step(2)
    assert calls == [('start', 0), ('gradients', 0, True), ('start', 1), ('gradients', 1, True)]
    assert same_weights(before, weights(solver.net))


def test_callback_exception_propagates(caffe, lenet_solver):
    solver = caffe.SGDSolver(lenet_solver('cbx.prototxt'))

    class Boom(Exception):
        pass

    def on_gradients():
        raise Boom('from on_gradients')

    solver.add_callback(lambda: None, on_gradients)
    with pytest.raises(Boom, match='from on_gradients'):
        solver.step(3)
    assert solver.iter == 0
    other = caffe.SGDSolver(lenet_solver('cby.prototxt'))

    def on_start():
        raise Boom('from on_start')
    other.add_callback(on_start, None)
    with pytest.raises(Boom, match='from on_start'):
        other.step(3)
    assert other.iter == 1  # the iteration it started finishes, then the step stops


def test_apply_update_is_a_step(caffe, lenet_solver):
    """net.forward(); net.backward(); apply_update() is what step(1) does."""
    path = lenet_solver('au.prototxt')
    manual = caffe.SGDSolver(path)
    stepped = caffe.SGDSolver(path)
    net = manual.net
    net.clear_param_diffs()
    net.forward()
    net.backward()
    manual.apply_update()
    assert manual.iter == 0  # not advanced, as in Caffe
    stepped.step(1)
    assert same_weights(weights(manual.net), weights(stepped.net))


def test_share_weights_and_param(caffe, lenet_solver, lenet_deploy):
    solver = caffe.SGDSolver(lenet_solver('sw.prototxt', max_iter=7))
    deploy = caffe.Net(lenet_deploy, caffe.TEST)
    solver.share_weights(deploy)
    solver.step(1)
    assert np.array_equal(deploy.params['ip1'][0].data, solver.net.params['ip1'][0].data)
    assert solver.param.max_iter == 7 and solver.param.base_lr == pytest.approx(0.01)


def test_step_argument_errors(caffe, lenet_solver):
    solver = caffe.SGDSolver(lenet_solver('e.prototxt'))
    with pytest.raises(ValueError):
        solver.step(-1)
    with pytest.raises(RuntimeError):
        caffe.SGDSolver('/nonexistent/solver.prototxt')
